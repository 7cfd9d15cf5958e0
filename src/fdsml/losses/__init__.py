"""Losses: PA-Triplet candidate filtering and mining, CouCE regularisers."""
