"""A sphinx-gallery image scraper for the figures hardmax's plotting functions return.

`hardmax.plots` builds `matplotlib.figure.Figure` objects without pyplot (no global state: the explorer's
server and scripts draw concurrently), so pyplot's scraper does not see them. This one renders every
Figure an example holds in a variable after a code block, once, in addition to pyplot's open figures.
A notebook shows such a figure when it is the last expression of a cell (`fig`).
"""

from __future__ import annotations

from matplotlib.figure import Figure
from sphinx_gallery.scrapers import figure_rst, matplotlib_scraper


def figure_scraper(block, block_vars, gallery_conf, **kwargs):
    import matplotlib.pyplot as plt

    # Figures already shown, held (not their ids, which a new figure could reuse once one is freed).
    seen = block_vars.setdefault("_hardmax_seen_figures", [])
    seen.extend(plt.figure(number) for number in plt.get_fignums())  # pyplot's own: its scraper's
    rst = matplotlib_scraper(block, block_vars, gallery_conf, **kwargs)   # pyplot's figures, then closed
    paths = []
    for value in list(block_vars["example_globals"].values()):
        if isinstance(value, Figure) and not any(value is shown for shown in seen):
            seen.append(value)
            path = next(block_vars["image_path_iterator"])
            value.savefig(path, dpi=110, bbox_inches="tight")
            paths.append(path)
    return rst + (figure_rst(paths, gallery_conf["src_dir"]) if paths else "")
