"""What `site` does at interpreter start-up, minus the cost: every Python runner is started with `python3 -S` and
calls start() first. A plain start spends about half its CPU in site, mostly in the `import` lines of .pth files
(matplotlib's namespace line alone imports importlib.util, contextlib and collections); this does the same work
from what the server measured once at its start, without importing os or any of that.

The server writes DATA_DIR/runtime/python-site (next to this file) at start: the directories the real site adds to
sys.path, one per line, measured by running the same interpreter with site. start() then does what site.main()
does, in its order:
  - removeduppaths()/abs_paths(): only needed when PYTHONPATH is set (the interpreter's own entries are absolute
    and distinct), and then done by the real site functions;
  - the user site directory (~/.local/lib/pythonX.Y/site-packages, PYTHONUSERBASE), when it exists: added by the
    real site.addsitedir, with its .pth files;
  - the measured directories, appended in order, each only if not already there;
  - the builtins quit, exit, copyright, credits, license and help, as the same _sitebuiltins objects site makes;
  - sys.__interactivehook__ (readline set-up, only used by `python -i`), loaded when first called;
  - `import sitecustomize` and `import usercustomize`, with site's error handling.
What is left out: the `import` lines of the system .pth files (setuptools' distutils shim, matplotlib's
mpl_toolkits namespace line: `import mpl_toolkits` works without it), and so the modules they would have imported
are not in sys.modules before the user's code. sys.flags.no_site is 1. docs/interpreter-protocol.md says more.

Without the python-site file (the server could not measure), start() runs the real site.main()."""

import builtins
import sys

import _sitebuiltins
import posix

SITE_FILE = "python-site"


def start():
    here = __file__.rpartition("/")[0]
    try:
        with open(here + "/" + SITE_FILE, "rb") as f:
            added = [line.decode("utf-8", "surrogateescape") for line in f.read().split(b"\n") if line]
    except OSError:
        import site
        site.main()
        return
    environ = posix.environ
    if b"PYTHONPATH" in environ:
        import site
        before = sys.path[:]
        site.removeduppaths()
        if before != sys.path:
            site.abs_paths()
    user_site = _user_site(environ)
    if user_site is not None:
        import site
        site.ENABLE_USER_SITE = True
        site.addsitedir(user_site)
    for d in added:
        if d not in sys.path:
            sys.path.append(d)
    eof = "Ctrl-D (i.e. EOF)"
    builtins.quit = _sitebuiltins.Quitter("quit", eof)
    builtins.exit = _sitebuiltins.Quitter("exit", eof)
    builtins.copyright = _printer("copyright", sys.copyright)
    builtins.credits = _printer("credits", """\
    Thanks to CWI, CNRI, BeOpen.com, Zope Corporation and a cast of thousands
    for supporting Python development.  See www.python.org for more information.""")
    here = getattr(sys, "_stdlib_dir", None)
    files, dirs = ([], []) if not here else (["LICENSE.txt", "LICENSE"], [here + "/..", here, "."])
    builtins.license = _printer("license", "See https://www.python.org/psf/license/", files, dirs)
    builtins.help = _sitebuiltins._Helper()
    if not sys.flags.isolated:
        sys.__interactivehook__ = _interactive_hook
    _customize("sitecustomize")
    if not sys.flags.no_user_site:
        _customize("usercustomize")


def _user_site(environ):
    """site.getusersitepackages() when that directory exists (and user site is enabled), else None."""
    if sys.flags.no_user_site:
        return None
    base = environ.get(b"PYTHONUSERBASE")
    if not base:
        home = environ.get(b"HOME")
        if not home:
            return None
        base = home.rstrip(b"/") + b"/.local"
    version = "%d.%d" % sys.version_info[:2]
    path = base.decode("utf-8", "surrogateescape") + "/lib/python" + version + "/site-packages"
    try:
        if posix.stat(path).st_mode & 0o170000 == 0o040000:
            return path
    except (OSError, ValueError):
        pass
    return None


def _printer(name, data, files=(), dirs=()):
    """_sitebuiltins._Printer(name, data, files, dirs) without the `import os` its __init__ does for path joins
    (the names are joined here as os.path.join would: every dir is absolute or '.', no name has a slash)."""
    p = _sitebuiltins._Printer.__new__(_sitebuiltins._Printer)
    p._Printer__name = name
    p._Printer__data = data
    p._Printer__lines = None
    p._Printer__filenames = [d + "/" + f for d in dirs for f in files]
    return p


def _interactive_hook():
    import site
    site.enablerlcompleter()
    sys.__interactivehook__()


def _customize(name):
    """site.execsitecustomize / execusercustomize."""
    try:
        try:
            __import__(name)
        except ImportError as exc:
            if exc.name != name:
                raise
    except Exception as err:
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write("Error in %s; set PYTHONVERBOSE for traceback:\n%s: %s\n"
                             % (name, err.__class__.__name__, err))
