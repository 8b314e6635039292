"""nbval settings for the chapters (README, "Validating notebooks").

Policy: outputs are validated strictly. nbval already skips images and widget model ids;
progress bars and memory addresses are normalised by tests/nbval_sanitize.cfg; a cell whose
output legitimately changes from run to run (wall-clock timings) starts with
`# NBVAL_IGNORE_OUTPUT` followed by a comment giving the reason. Its asserts still run. A cell of a chaotic training (its per-seed results depend on the
CPU's last bits) starts with `# NBVAL_STATISTICAL` and a reason: tests/nbval_statistical.py (loaded by
the root conftest.py) compares it within a declared statistical tolerance instead of as text.
"""

import os

# The chapters' kernels inherit this process's environment. A non-interactive MPLBACKEND (e.g. Agg,
# set by many CI systems) would make `plt.show()` display nothing, so the stored figure outputs
# could never match; the kernel's own inline backend is what the stored outputs were made with.
if os.environ.get("MPLBACKEND", "").lower() == "agg":
    del os.environ["MPLBACKEND"]
