"""The book's plots: one style and palette (:mod:`.style`), shared figures (:mod:`.figures`), the explorer."""
from .figures import gate_legend, integer_ticks, plot_attention_sums, plot_gate_bars, plot_mean_band, plot_rank_decay
from .style import LABELS, PALETTE, color, use_style

__all__ = ["LABELS", "PALETTE", "color", "gate_legend", "integer_ticks", "plot_attention_sums", "plot_gate_bars",
           "plot_mean_band", "plot_rank_decay", "use_style"]
