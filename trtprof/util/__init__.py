"""Small helpers every wing uses: data files, wording, text tables, labels, scratch dirs, signals, the clock."""
