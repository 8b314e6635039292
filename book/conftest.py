"""nbval settings for the chapters (README, "Validating notebooks").

Policy: outputs are validated strictly. nbval already skips images and widget model ids;
progress bars and memory addresses are normalised by tests/nbval_sanitize.cfg; a cell whose
output legitimately changes from run to run (wall-clock timings) starts with
`# NBVAL_IGNORE_OUTPUT` followed by a comment giving the reason. Its asserts still run.
"""

import os

# The chapters' kernels inherit this process's environment. A non-interactive MPLBACKEND (e.g. Agg,
# set by many CI systems) would make `plt.show()` display nothing, so the stored figure outputs
# could never match; the kernel's own inline backend is what the stored outputs were made with.
if os.environ.get("MPLBACKEND", "").lower() == "agg":
    del os.environ["MPLBACKEND"]
