"""fdsml: formula-driven supervised metric learning on FineFractalDB."""

__version__ = "0.1.0"
