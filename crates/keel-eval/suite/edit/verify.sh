# Passes when mode carries the trial's marker and the other line is untouched.
grep -qx "mode = $MARKER" config.ini && grep -qx "name = demo" config.ini
