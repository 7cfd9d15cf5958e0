"""Losses: PA-Triplet candidate filtering and mining, the proxy losses by name, CouCE regularisers; all in float32."""
