"""matplotlib backend for Python sessions (MPLBACKEND=module://codeexec_mpl): Agg rendering, and show() turns
every open figure into a PNG that the session runner returns with the call, then closes it.

The session runner imports this module at its start, before it restores sys.path, so that matplotlib can find it
by name later. That import must not import matplotlib (a session that never plots would pay ~0.4 s for it): the
backend's classes are looked up only when matplotlib first asks for one of them."""

import sys

_captured = []


def show(*args, **kwargs):
    capture_open_figures()


def capture_open_figures():
    """Renders every figure pyplot has open as PNG (tight bounding box, 100 dpi) and closes them all, even when one
    fails to render: a broken figure must not fail every later call too."""
    helpers = sys.modules.get("matplotlib._pylab_helpers")
    if helpers is None:
        return
    import io
    try:
        for manager in helpers.Gcf.get_all_fig_managers():
            buffer = io.BytesIO()
            manager.canvas.figure.savefig(buffer, format="png", bbox_inches="tight", dpi=100)
            _captured.append(buffer.getvalue())
    finally:
        helpers.Gcf.destroy_all()


def take_captured():
    figures = list(_captured)
    _captured.clear()
    return figures


def _load_backend():
    from matplotlib.backend_bases import FigureManagerBase
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    # Real module globals from now on: pyplot copies the backend module's vars() into its backend class.
    globals().setdefault("FigureCanvas", FigureCanvasAgg)
    globals().setdefault("FigureManager", FigureManagerBase)


def __getattr__(name):
    if not name.startswith("__"):
        _load_backend()
        if name in globals():
            return globals()[name]
    raise AttributeError("module 'codeexec_mpl' has no attribute " + repr(name))
