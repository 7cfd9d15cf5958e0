"""Errors the user can fix: a wrong parameter, a missing folder or input, a refused checkpoint.

Every error type of the project that a user fixes by changing a key, a file or the order of
commands derives from :class:`UserFixableError`, so ``kedro run`` answers it in a few lines
(the message names the key or file and the fix) instead of a traceback, while any other
exception, a real bug, keeps its traceback.
"""

from __future__ import annotations


class UserFixableError(Exception):
    """Base of the errors whose message alone tells the user what to change."""


class MissingInputError(UserFixableError, FileNotFoundError):
    """An artefact another command writes is not there yet; the message names that command."""


class GenerationError(UserFixableError, RuntimeError):
    """A dataset's class or instance could not be drawn within the configured number of attempts."""


class CheckpointError(UserFixableError, ValueError):
    """A checkpoint file is refused: not an fdsml checkpoint, or of another architecture."""


class DivergedError(UserFixableError, FloatingPointError):
    """Training produced a non-finite loss; the message names the step and the checkpoint that stays."""


def find_user_error(error: BaseException | None) -> UserFixableError | None:
    """The first :class:`UserFixableError` in ``error``'s chain (``raise ... from``, or raised while handling).

    Kedro re-raises a dataset's failure as its own ``DatasetError`` from the original, so the
    user's mistake can sit anywhere in the chain.
    """
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, UserFixableError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None
