# Passes when the final answer carries the line the server returned (the trial's code).
grep -q "$MARKER" "$ANSWER_FILE"
