import os

# Plots in tests never need a display.
os.environ.setdefault("MPLBACKEND", "Agg")
