"""The command line's one error type: a one-line message, exit status 2 (shared by every sub-command module)."""


class CliError(RuntimeError):
    pass
