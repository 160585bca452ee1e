# Passes when the final answer carries the trial's value.
grep -q "$MARKER" "$ANSWER_FILE"
