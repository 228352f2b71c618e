"""``python -m scripts.preflight`` (``make preflight``): is an account and region
ready for an instance's first deploy?

The command is :mod:`scripts.preflight.__main__`, which runs the checks in
:mod:`scripts.preflight.checks`. Each check lives in its own module and
returns a :class:`scripts.preflight.result.Result`.
"""
