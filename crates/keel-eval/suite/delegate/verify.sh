# Passes when the final answer carries the trial's code.
grep -q "$MARKER" "$ANSWER_FILE"
