"""Losses in float32 whatever precision the forward pass ran in.

Under autocast a matmul runs in bf16 even on float32 inputs, so ``.float()`` on the embeddings
is not enough: a loss made of small differences (the invariance KL between two close views, a
triplet margin, a covariance) must also run with autocast switched off. :func:`full_precision`
does both, and every loss of the project goes through it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch

Function = TypeVar("Function", bound=Callable[..., Any])


def _float32(value: Any) -> Any:
    """``value`` as float32 if it is a floating-point tensor of lower precision (bf16, fp16), unchanged otherwise."""
    if torch.is_tensor(value) and value.is_floating_point() and torch.finfo(value.dtype).bits < 32:
        return value.float()
    return value


def full_precision(function: Function) -> Function:
    """``function`` (a loss, or a loss module's ``forward``) computed in float32.

    Its low-precision tensor arguments are cast to float32 and it runs with autocast off on the
    CPU and on every device its tensor arguments live on. Gradients flow back through the cast
    in the forward pass's dtype. Nesting is harmless.
    """

    @functools.wraps(function)
    def in_float32(*args: Any, **kwargs: Any) -> Any:
        args = tuple(_float32(value) for value in args)
        kwargs = {name: _float32(value) for name, value in kwargs.items()}
        devices = {value.device.type for value in (*args, *kwargs.values()) if torch.is_tensor(value)}
        with contextlib.ExitStack() as stack:
            for device_type in sorted(devices | {"cpu"}):
                stack.enter_context(torch.autocast(device_type=device_type, enabled=False))
            return function(*args, **kwargs)

    return in_float32  # type: ignore[return-value]
