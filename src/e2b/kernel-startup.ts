/**
 * Python run inside every IPython kernel of the code interpreter once it starts (and after
 * each restart), as E2B's template does with its IPython startup scripts and kernel config:
 * - the `e2b/data` formatter (a pandas DataFrame as `{column: [values]}`, timestamps in ISO
 *   form), the `e2b/chart` formatter (a matplotlib figure's data, kernel-charts.ts, given as
 *   CHARTS_SOURCE and loaded on the first figure) and E2B's `application/json` for a list
 *   or dict;
 * - plain text without the sequence truncation of IPython's default, tracebacks without
 *   colours (E2B's kernel config);
 * - per-run environment variables that are undone after the run (`set_env` / `restore_env`);
 * - PIL images: `Image.show()` and `Image.save(path)` display the image (a PNG result), as
 *   E2B's startup script makes them, rather than look for a desktop viewer.
 *
 * The bridge (kernel-bridge.ts) runs it as the module `_e2b` (sys.modules) so that nothing
 * of it lands in the user's namespace: a run sees the same globals as in E2B's kernels.
 */
export const KERNEL_STARTUP = String.raw`
import json, os, sys, types
from IPython import get_ipython
from IPython.core.formatters import BaseFormatter, JSONFormatter
from traitlets import ObjectName, Unicode

_saved = {}

def set_env(env):
    # Remembers what each variable was before the run, so restore_env can put it back.
    _saved.clear()
    for k, v in env.items():
        _saved[k] = os.environ.get(k)
        os.environ[k] = v

def restore_env():
    for k, v in _saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    _saved.clear()


def _cell(pd, v):
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    # A missing value (NaN, NaT) is null: NaN is not JSON, and a line with it would not parse.
    if v is pd.NaT or (isinstance(v, float) and v != v):
        return None
    return v


class DataFormatter(BaseFormatter):
    format_type = Unicode("e2b/data")
    print_method = ObjectName("_repr_e2b_data_")
    _return_type = (dict, str)

    def __call__(self, obj):
        # Only a loaded pandas can have made a DataFrame: other results do not import it.
        pd = sys.modules.get("pandas")
        if pd is None or not isinstance(obj, pd.DataFrame):
            return super().__call__(obj)
        out = {}
        for column, values in obj.to_dict(orient="list").items():
            out[str(column) if not isinstance(column, (str, int, float, bool)) else column] = [_cell(pd, v) for v in values]
        return out


class ChartFormatter(BaseFormatter):
    format_type = Unicode("e2b/chart")
    print_method = ObjectName("_repr_e2b_chart_")
    _return_type = (dict, str)

    def __call__(self, obj):
        if sys.modules.get("matplotlib") is None:
            return super().__call__(obj)
        from matplotlib.figure import Figure
        if not isinstance(obj, Figure):
            return super().__call__(obj)
        try:
            return _charts().figure_to_dict(obj)
        except Exception:
            # A figure the extractor does not understand still gives its PNG.
            return {}


def _charts():
    # Loaded on the first figure: a run that draws nothing pays nothing for it.
    m = sys.modules.get("_e2b_charts")
    if m is None:
        m = types.ModuleType("_e2b_charts")
        exec(CHARTS_SOURCE, m.__dict__)
        sys.modules["_e2b_charts"] = m
    return m


def _plain(v):
    # numpy scalars and arrays as JSON has them (E2B serializes with orjson's numpy option).
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError


class ListDictJSONFormatter(JSONFormatter):
    """A list or dict result also comes as json, as in E2B's kernels."""

    def __call__(self, obj):
        if isinstance(obj, (list, dict)):
            try:
                return json.loads(json.dumps(obj, default=_plain)), {"expanded": True}
            except (TypeError, ValueError):
                pass
        return super().__call__(obj)


def _patch_pil():
    try:
        from IPython.display import display
        from PIL.Image import Image
        from PIL.ImageShow import UnixViewer
    except ImportError:
        return
    # No desktop viewer here: showing falls through to PIL's IPython viewer (a display).
    UnixViewer.show_file = lambda self, path, **options: 0
    original_save = Image.save

    def save(image, fp, format=None, **options):
        if isinstance(fp, str):
            display(image)
        return original_save(image, fp, format, **options)

    Image.save = save


_patch_pil()
ip = get_ipython()
ip.display_formatter.formatters["e2b/data"] = DataFormatter(parent=ip.display_formatter)
ip.display_formatter.formatters["e2b/chart"] = ChartFormatter(parent=ip.display_formatter)
ip.display_formatter.formatters["application/json"] = ListDictJSONFormatter(parent=ip.display_formatter)
ip.display_formatter.formatters["text/plain"].max_seq_length = 0
ip.run_line_magic("colors", "NoColor")
del ip
`;

