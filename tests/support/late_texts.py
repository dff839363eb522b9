"""A question, the passage that answers it and passages that do not: the late-interaction
model's and colbert-small's tests."""

QUESTION = "When did Caroline go to the LGBTQ support group?"
ANSWER = "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."
OTHERS = (
    "Melanie: I painted a sunrise over the lake last week.",
    "The printer on the third floor is out of toner again.",
    "We had pasta for dinner on Friday.",
)
