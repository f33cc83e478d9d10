"""The English and Chinese texts: the same keys in both, and the page switch (partial: intro, tabs, legends)."""
from __future__ import annotations

import app
from specviz import i18n, render


def test_both_languages_have_every_key_and_the_switch_changes_the_page():
    assert set(i18n.EN) == set(i18n.ZH) and all(i18n.ZH.values())
    intro, *tabs_and_legends = app.language_outputs("中文")
    assert "推测解码" in intro and "奖励 token" in intro
    tabs, legends = tabs_and_legends[:6], tabs_and_legends[6:]
    assert [t.label for t in tabs] == [i18n.ZH[k] for k in i18n.TABS]
    assert len(legends) == 3 and "被接受的猜测" in legends[0] and "sv-accepted" in legends[0]
    english = app.language_outputs("English")
    assert english[0] == i18n.EN["intro"] and english[-1] == render.legend_html()
