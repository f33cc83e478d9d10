"""The page's texts in English and Simplified Chinese, one dict per language (same keys in both).

Partial: the introduction, the tab names and the colour legend switch today; the other labels, the
step narration and the error messages are still English only."""
from __future__ import annotations

LANGUAGES = {"English": "en", "中文": "zh"}  # the switch's choices -> language code

EN = {
    "intro": """# specviz: speculative decoding, round by round
A cheap guesser proposes a few tokens; the big **target** model checks them all in **one** forward pass,
keeps the longest run it agrees with, and adds one token of its own (the **bonus**). Same text as plain
decoding (at temperature 0), fewer target forwards. Pick a prompt and a method, then press **Run**.""",
    "tab.live": "Live run",
    "tab.compare": "Side by side",
    "tab.step": "Step by step (classroom)",
    "tab.replay": "Replay a trace",
    "tab.explain": "How it works",
    "tab.api": "API",
    "legend.accepted": "accepted guess",
    "legend.rejected": "rejected guess (replaced)",
    "legend.unreached": "guess after a rejection (never checked)",
    "legend.bonus": "bonus token (from the target)",
    "legend.note": "│ starts a round; <sup>3/5</sup> = kept / guessed. Hover a token for its draft and target probability.",
}

ZH = {
    "intro": """# specviz：推测解码，一轮一轮地看
一个廉价的草稿（猜测器）先提出几个 token；大的**目标模型**在**一次**前向计算中检查全部猜测，
保留它认可的最长一段，再自己添加一个 token（**奖励 token**）。在温度 0 时生成的文本与普通解码完全相同，
但目标模型的前向次数更少。选择一个提示词和一种方法，然后点击 **Run**。""",
    "tab.live": "实时运行",
    "tab.compare": "并排比较",
    "tab.step": "逐轮讲解（课堂）",
    "tab.replay": "回放记录",
    "tab.explain": "原理",
    "tab.api": "API",
    "legend.accepted": "被接受的猜测",
    "legend.rejected": "被拒绝的猜测（已替换）",
    "legend.unreached": "拒绝之后的猜测（未检查）",
    "legend.bonus": "奖励 token（来自目标模型）",
    "legend.note": "│ 表示一轮的开始；<sup>3/5</sup> = 接受数 / 猜测数。鼠标悬停在 token 上可查看草稿模型与目标模型的概率。",
}

TEXTS = {"en": EN, "zh": ZH}
TABS = ("tab.live", "tab.compare", "tab.step", "tab.replay", "tab.explain", "tab.api")


def text(key: str, lang: str = "en") -> str:
    """The text of `key` in `lang`; English where a language lacks it."""
    return TEXTS.get(lang, EN).get(key, EN[key])


def legend_labels(lang: str = "en") -> dict[str, str]:
    """render.legend_html's labels: role -> label."""
    return {role: text(f"legend.{role}", lang) for role in ("accepted", "rejected", "unreached", "bonus")}
