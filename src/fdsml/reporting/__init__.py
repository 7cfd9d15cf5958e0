"""The project report: one Markdown page gathering what every pipeline measured, with its pictures."""
