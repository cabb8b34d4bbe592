# The agent's own error types that several modules raise. A leaf module.


class RequestError(Exception):
    """A request the agent cannot run as asked (a bad field, policy, input or mode): an internal
    error of that execution only."""
