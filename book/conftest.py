"""nbval settings for the chapters (README, "Validating notebooks").

Policy: outputs are validated strictly. nbval already skips images and widget model ids;
progress bars and memory addresses are normalised by tests/nbval_sanitize.cfg; a cell whose
output legitimately changes from run to run (wall-clock timings) starts with
`# NBVAL_IGNORE_OUTPUT` followed by a comment giving the reason. Its asserts still run.
"""
