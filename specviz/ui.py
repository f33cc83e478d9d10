"""What every tab of the page shares: translatable components (Page, tr) and how errors reach the user.

Tabs live in specviz/tabs/ (one module each) or in app.py; both build their components through a Page so the
language switch reaches them, and wrap their handlers in `in_status`.
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator, Optional

import gradio as gr
import torch

from . import i18n
from .models import ModelLoadError

UI = dict(api_visibility="private")  # page-only listeners: the documented API is /speculate alone
MODEL = dict(concurrency_id="model", concurrency_limit=1, **UI)  # every listener that touches a model


def shown(value: Any, limit: int = 60) -> str:
    """A raw value as an error message quotes it: repr, cut short (a message never echoes a whole text)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error(key: str, lang: str, **values: Any) -> gr.Error:
    """A message for the user, in their language."""
    return gr.Error(i18n.text(key, lang, **values))


@contextlib.contextmanager
def user_errors(lang: str = "en") -> Iterator[None]:
    """Engine and model errors reach the user as a readable message instead of a broken page.

    Nothing of a failed request survives it: models are read-only, per-run state dies with the run."""
    try:
        yield
    except (ValueError, ModelLoadError) as err:
        raise error("err.engine", lang, message=str(err)) from err
    except (torch.OutOfMemoryError, MemoryError) as err:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        raise error("err.memory", lang) from err


def in_status(handler: Callable, outputs: int, status: Optional[int] = 0) -> Callable:
    """A page handler whose gr.Error shows in its tab's status line (output number `status`; None: nowhere)
    while every other output keeps what it showed, instead of a toast over red "Error" outputs.

    Generator handlers stay generators (Gradio streams them); the API's endpoint is not wrapped."""

    def failed(err: gr.Error) -> tuple:
        values = [gr.skip()] * outputs
        if status is not None:
            values[status] = i18n.text("status.error", "en", message=err.message)
        return tuple(values)

    if inspect.isgeneratorfunction(getattr(handler, "func", handler)):
        def stream(*args: Any) -> Iterator[tuple]:
            try:
                yield from handler(*args)
            except gr.Error as err:
                yield failed(err)
        return stream

    def call(*args: Any) -> tuple:
        try:
            return handler(*args)
        except gr.Error as err:
            return failed(err)
    return call


class Localized:
    """A text the language switch recomputes: a function of the language code ("en", "zh")."""

    def __init__(self, make: Callable[[str], Any]):
        self.make = make


def tr(key: str, **values: Any) -> Localized:
    """The i18n text `key` (formatted with `values`) in whichever language the page shows."""
    return Localized(lambda lang: i18n.text(key, lang, **values))


class Page:
    """The page's translatable properties: every component built through it with Localized keyword
    arguments is registered, and `updates(lang)` gives one gr.update per component for the switch."""

    def __init__(self):
        self.parts: list[tuple[Any, dict[str, Localized]]] = []

    def __call__(self, cls: type, *args: Any, **kwargs: Any) -> Any:
        texts = {name: value for name, value in kwargs.items() if isinstance(value, Localized)}
        component = cls(*args, **{**kwargs, **{name: value.make("en") for name, value in texts.items()}})
        return self.register(component, **texts)

    def register(self, component: Any, **texts: Localized) -> Any:
        self.parts.append((component, texts))
        return component

    def components(self) -> list:
        return [component for component, _ in self.parts]

    def updates(self, lang: str) -> list[dict]:
        return [gr.update(**{name: value.make(lang) for name, value in texts.items()}) for _, texts in self.parts]
