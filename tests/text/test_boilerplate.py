"""BoilerplateFilter: acknowledgements, near-empty turns and Hermes scaffolding are skipped."""

from __future__ import annotations

import pytest

from memstream.text.boilerplate import (
    ACK,
    SCAFFOLDING,
    TOO_SHORT,
    BoilerplateConfig,
    BoilerplateFilter,
    user_instruction,
)

FILTER = BoilerplateFilter()

# Hermes 0.19's own shapes (agent/skill_commands.py, agent/skill_bundles.py, gateway/run.py).
SKILL_BARE = (
    '[IMPORTANT: The user has invoked the "deploy" skill, indicating they want you to follow '
    "its instructions. The full skill content is loaded below.]\n\n"
    "# Deploy\n\nRun `make deploy` and check the dashboards.\n\n"
    "[Skill directory: /home/u/.hermes/skills/deploy]"
)
SKILL_WITH_INSTRUCTION = (
    SKILL_BARE
    + "\n\nThe user has provided the following instruction alongside the skill invocation: "
    + "deploy the billing service to staging tonight"
    + "\n\n[Runtime note: model switched]"
)
BUNDLE_WITH_INSTRUCTION = (
    '[IMPORTANT: The user has invoked the "/ops /deploy" stacked skill bundle, loading 2 skills '
    "together. Treat every skill below as active guidance for this turn.]\n\n"
    "Skills loaded: ops, deploy\n\nUser instruction: rotate the staging certificates first"
    "\n\n[Loaded as part of the ops bundle]\n# Ops\n..."
)
SESSION_NOTE = (
    "[System note: The user's previous session expired due to inactivity. This is a fresh conversation with no prior context.]"
)


@pytest.mark.parametrize(
    "text",
    [
        "ok",
        "okay",
        "OK!",
        "thanks",
        "Thank you",
        "thx",
        "continue",
        "go on",
        "yes",
        "no",
        "sure",
        "got it",
        "cool",
        "great",
        "👍",
        "danke",
        "Weiter",
        "ja",
        "merci",
        "d'accord",
        "D’accord !",
        "oui",
        "continue",
        "gracias",
        "vale",
        "sí",
        "si",
        "sigue",
        "obrigado",
        "obrigada",
        "grazie",
        "ありがとう",
        "はい",
        "続けて",
        "谢谢",
        "好的",
        "继续",
        "감사합니다",
        "고마워",
        "네",
        "계속",
    ],
)
def test_acknowledgement_in_any_supported_language_is_an_ack(text):
    assert FILTER.reason(text) == ACK


@pytest.mark.parametrize(
    "text",
    [
        "ok thanks!!",
        "Thank you so much!",
        "OK, OK. Thanks 🙏",
        "great, continue",
        "yes please",
        "好的谢谢",
        "Merci beaucoup 🙏",
        "vale, gracias",
        "no no no",
        "Danke schön!",
    ],
)
def test_acknowledgements_are_recognised_through_case_punctuation_emoji_and_repetition(text):
    assert FILTER.reason(text) == ACK


def test_a_turn_of_only_emoji_is_an_ack():
    assert FILTER.reason("🙏🙏 🎉") == ACK


@pytest.mark.parametrize(
    "text",
    [
        "okra soup recipe for tonight please",
        "thanksgiving plans with the whole family",
        "no, use Postgres 16 instead of MySQL",
        "ok so what about the database migration?",
        "yes, but only after the tests pass on CI",
    ],
)
def test_a_turn_that_says_more_than_an_acknowledgement_is_substantive(text):
    assert FILTER.reason(text) is None


@pytest.mark.parametrize(
    "text",
    ["My name is Al", "I live in Berlin", "我叫李明", "저는 서울에 살아요", "Deploy the billing service to staging"],
)
def test_short_but_meaningful_turns_are_substantive(text):
    assert FILTER.reason(text) is None


@pytest.mark.parametrize("text", ["fix the bug", "lol what", "?", "...", "", "   \n "])
def test_turns_below_the_length_floor_are_too_short(text):
    assert FILTER.reason(text) == TOO_SHORT


def test_cjk_characters_count_three_times_toward_the_floor():
    assert FILTER.reason("我叫李明") is None  # 4 characters, worth 12
    assert FILTER.reason("東京") == TOO_SHORT  # worth 6
    latin_only = BoilerplateFilter(BoilerplateConfig(cjk_weight=1))
    assert latin_only.reason("我叫李明") == TOO_SHORT


def test_the_floor_is_configurable_and_zero_turns_it_off():
    assert BoilerplateFilter(BoilerplateConfig(min_chars=30)).reason("I live in Berlin") == TOO_SHORT
    assert BoilerplateFilter(BoilerplateConfig(min_chars=0)).reason("fix it") is None


@pytest.mark.parametrize("text", ["/new", "/reset", "  /retry  ", "/model gpt-4o", "/personality pirate"])
def test_a_bare_slash_command_is_scaffolding(text):
    assert FILTER.reason(text) == SCAFFOLDING


def test_a_slash_command_carrying_a_real_instruction_is_substantive():
    assert FILTER.reason("/plan move the staging database to Postgres 16 this week") is None


def test_a_path_that_starts_with_a_slash_is_not_a_command():
    assert FILTER.reason("/etc/hosts is wrong on the build box") is None


def test_a_bare_skill_invocation_is_scaffolding_and_cleans_to_nothing():
    assert FILTER.reason(SKILL_BARE) == SCAFFOLDING
    assert FILTER.clean(SKILL_BARE) == ""
    assert user_instruction(SKILL_BARE) is None


def test_a_skill_invocation_keeps_only_the_users_instruction():
    assert FILTER.clean(SKILL_WITH_INSTRUCTION) == "deploy the billing service to staging tonight"
    assert FILTER.reason(SKILL_WITH_INSTRUCTION) is None


def test_a_bundle_invocation_keeps_only_the_users_instruction():
    assert FILTER.clean(BUNDLE_WITH_INSTRUCTION) == "rotate the staging certificates first"


def test_a_skill_invocation_with_an_acknowledgement_as_instruction_is_an_ack():
    text = SKILL_BARE + ("\n\nThe user has provided the following instruction alongside the skill invocation: ok thanks")
    assert FILTER.reason(text) == ACK


def test_user_instruction_returns_ordinary_text_unchanged():
    assert user_instruction("please deploy") == "please deploy"


def test_an_injected_system_note_alone_is_scaffolding():
    assert FILTER.reason(SESSION_NOTE) == SCAFFOLDING


def test_an_injected_note_before_the_users_text_is_removed():
    text = SESSION_NOTE + "\n\nPlease rotate the staging database credentials today."
    assert FILTER.clean(text) == "Please rotate the staging database credentials today."
    assert FILTER.reason(text) is None


def test_a_recalled_memory_block_is_removed():
    text = (
        "<memory-context>\n[System note: The following is recalled memory context, NOT new user "
        "input.]\n\nUser lives in Berlin.\n</memory-context>\n\nWhat time is it in Lisbon right now?"
    )
    assert FILTER.clean(text) == "What time is it in Lisbon right now?"


def test_bracketed_text_that_is_not_a_hermes_note_is_kept():
    text = "[draft] Subject: quarterly numbers for the board"
    assert FILTER.clean(text) == text
    assert FILTER.reason(text) is None


def test_extra_phrases_extend_the_acknowledgements():
    f = BoilerplateFilter(BoilerplateConfig(extra_phrases=("ship it", "make it so")))
    assert f.reason("Ship it! 🚀") == ACK
    assert f.reason("make it so, thanks") == ACK
    assert FILTER.reason("make it so, thanks") is None


def test_a_disabled_filter_lets_every_turn_through_unchanged():
    f = BoilerplateFilter(BoilerplateConfig(enabled=False))
    for text in ["ok", "", "/new", SKILL_BARE]:
        assert f.reason(text) is None
    assert f.clean(SKILL_BARE) == SKILL_BARE.strip()


@pytest.mark.parametrize(
    "text",
    ["ok", "/new", SKILL_BARE, SKILL_WITH_INSTRUCTION, SESSION_NOTE, SESSION_NOTE + "\n\nthanks!", "I live in Berlin", "fix it"],
)
def test_a_turn_is_substantive_exactly_when_its_cleaned_text_is(text):
    assert (FILTER.reason(text) is None) == (FILTER.reason(FILTER.clean(text)) is None)
