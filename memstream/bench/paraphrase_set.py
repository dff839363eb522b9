"""The fleet paraphrase set of ``memstream bench paraphrase``: a few facts about one user,
each written by every agent of a fleet in its own words, among facts only one agent knows.

Generated from templates, deterministically (a seeded ``random.Random``): the same set
every run. Two template sets: ``tuning`` (what the collapse threshold was chosen on) and
``held_out`` (other wordings of the same facts, other distinct facts: what the result is
read on). Each memory carries the fact it states (``fact``), so what a search returns is
counted in distinct facts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["FleetMemory", "Question", "fleet_set"]


@dataclass(frozen=True, slots=True)
class FleetMemory:
    agent: str
    fact: str  # the fact it states: "shared:theme", "own:agent-07"
    text: str


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    facts: tuple[str, ...]  # the facts that answer it


# fact -> (tuning wordings, held-out wordings); "{who}" is the user's name or a pronoun
SHARED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "theme": (
        (
            "{who} prefers dark mode",
            "{who} likes the dark theme",
            "{who} always switches the editor to a dark colour scheme",
            "{who} wants dark mode everywhere",
            "{who} asked for the dark theme again",
            "{who} uses a dark UI theme",
        ),
        (
            "{who} can't stand light themes and keeps everything dark",
            "{who} sets every app to dark mode",
            "{who} is a dark-theme person",
            "{who} said the dark colour scheme is easier on the eyes",
        ),
    ),
    "city": (
        (
            "{who} lives in Lisbon",
            "{who} is based in Lisbon, Portugal",
            "{who} moved to Lisbon and lives there now",
            "{who} has a home in Lisbon",
            "{who} works from Lisbon",
            "{who} is a Lisbon resident",
        ),
        (
            "{who} has a flat in Lisbon",
            "{who} calls Lisbon home",
            "{who} is living in Portugal's capital, Lisbon",
            "{who} resides in Lisbon",
        ),
    ),
    "language": (
        (
            "{who} mostly writes Go",
            "{who} has Go as the main programming language",
            "{who} prefers Go for new services",
            "{who} codes in Golang most days",
            "{who} likes writing Go more than anything else",
            "{who} picks Go for backend work",
        ),
        (
            "{who} reaches for Go first when writing code",
            "{who} is a Go programmer",
            "{who} writes nearly all of their code in Golang",
            "{who} favours the Go language",
        ),
    ),
    "diet": (
        (
            "{who} is vegetarian",
            "{who} doesn't eat meat",
            "{who} follows a vegetarian diet",
            "{who} avoids meat and fish",
            "{who} only eats vegetarian food",
            "{who} went vegetarian years ago",
        ),
        (
            "{who} keeps a meat-free diet",
            "{who} never orders meat",
            "{who} eats no meat at all",
            "{who} is a vegetarian eater",
        ),
    ),
    "meetings": (
        (
            "{who} prefers meetings in the morning",
            "{who} likes to have meetings before noon",
            "{who} wants calls scheduled early in the day",
            "{who} asks for morning slots for meetings",
            "{who} would rather meet in the mornings",
            "{who} keeps afternoons free of meetings",
        ),
        (
            "{who} books meetings for the early hours",
            "{who} is happiest with calls at 9 am",
            "{who} schedules syncs in the morning only",
            "{who} finds morning meetings work best",
        ),
    ),
}

WHO = ("The user", "Dana", "She", "The user said she", "Dana mentioned she")

# facts only one agent knows: (subject pieces, detail pieces) of each set, combined once each
OWN: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "tuning": (
        ("the billing service", "the search cluster", "the nightly backup", "the staging database", "the CI runner"),
        (
            "runs on port {n}",
            "was last restarted on day {n} of the quarter",
            "keeps {n} days of logs",
            "is owned by team {n}",
            "needs {n} GB of memory",
            "failed {n} times last week",
            "has a budget of {n} euros a month",
            "is pinned to version 1.{n}",
            "alerts the on-call after {n} minutes",
            "stores {n} million rows",
        ),
    ),
    "held_out": (
        ("the payments gateway", "the mail relay", "the analytics job", "the image cache", "the auth proxy"),
        (
            "listens on port {n}",
            "was migrated in sprint {n}",
            "retains {n} weeks of data",
            "belongs to squad {n}",
            "uses {n} CPU cores",
            "timed out {n} times yesterday",
            "costs {n} dollars a day",
            "runs release 2.{n}",
            "pages someone after {n} failed checks",
            "holds {n} thousand files",
        ),
    ),
}

QUESTIONS: dict[str, tuple[Question, ...]] = {
    "tuning": (
        Question("which theme does the user like?", ("shared:theme",)),
        Question("where does Dana live?", ("shared:city",)),
        Question("what programming language does the user prefer?", ("shared:language",)),
        Question("is the user vegetarian?", ("shared:diet",)),
        Question("when does Dana want meetings?", ("shared:meetings",)),
        Question("what does the user prefer?", ()),
        # facts of one agent each, alike in their words: none may collapse into another
        Question("which port does the billing service run on?", ()),
        Question("how much memory does the staging database need?", ()),
    ),
    "held_out": (
        Question("does she like dark mode?", ("shared:theme",)),
        Question("which city is the user in?", ("shared:city",)),
        Question("what language does Dana code in?", ("shared:language",)),
        Question("what food does the user eat?", ("shared:diet",)),
        Question("what time of day suits her for calls?", ("shared:meetings",)),
        Question("what do we know about Dana's preferences?", ()),
        Question("what port does the payments gateway listen on?", ()),
        Question("how many CPU cores does the analytics job use?", ()),
    ),
}


def fleet_set(part: str = "held_out", agents: int = 50, seed: int = 29) -> tuple[list[FleetMemory], tuple[Question, ...]]:
    """The memories of ``agents`` agents (each shared fact once per agent, in one of the
    part's wordings, and one fact of its own, in the part's templates) and the part's
    questions, in the order the agents wrote them (shuffled, seeded)."""
    if part not in QUESTIONS:
        raise ValueError(f"part must be one of {sorted(QUESTIONS)}, got {part!r}")
    rng = random.Random(f"{seed}:{part}")
    held = part == "held_out"
    subjects, details = OWN[part]
    own = [(s, d) for d in details for s in subjects]
    rng.shuffle(own)
    memories: list[FleetMemory] = []
    for i in range(agents):
        agent = f"agent-{i:02d}"
        for fact, (tuning, held_out) in SHARED.items():
            wording = rng.choice(held_out if held else tuning)
            who = rng.choice(WHO)
            memories.append(FleetMemory(agent, f"shared:{fact}", wording.format(who=who)))
        subject, detail = own[i % len(own)]
        text = f"{subject.capitalize()} {detail.format(n=rng.randint(10, 99))}"
        memories.append(FleetMemory(agent, f"own:{agent}", text))
    rng.shuffle(memories)
    return memories, QUESTIONS[part]
