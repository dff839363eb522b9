"""Labelled sentences for the rule-based fact extractor (``memstream.text.facts.extract``).

Each case is ``(text, speaker, expected)``; ``expected`` is the set of
``(kind, subject, key, value)`` the extractor should produce, compared with values
case-folded and stripped of outer punctuation. An empty set means "no facts".

``DEV_CASES`` were written before the extractor and then used while building it;
``HELD_OUT_CASES`` were written after it and never tuned on: their precision and recall
are the honest estimate.
"""

from __future__ import annotations

U, A = "user", "assistant"

DEV_CASES: list[tuple[str, str, set[tuple[str, str, str, str]]]] = [
    # identity
    ("My name is Alice Johnson.", U, {("identity", "user", "name", "Alice Johnson")}),
    ("Hi, I'm Marco.", U, {("identity", "user", "name", "Marco")}),
    ("Call me Sam.", U, {("identity", "user", "name", "Sam")}),
    ("I'm a backend engineer.", U, {("identity", "user", "role", "backend engineer")}),
    (
        "I work as a data scientist at Spotify.",
        U,
        {
            ("identity", "user", "role", "data scientist"),
            ("identity", "user", "employer", "Spotify"),
        },
    ),
    ("I work at Google.", U, {("identity", "user", "employer", "Google")}),
    ("I work for the Financial Times.", U, {("identity", "user", "employer", "Financial Times")}),
    ("I live in Berlin.", U, {("identity", "user", "location", "Berlin")}),
    ("I moved to Lisbon last month.", U, {("identity", "user", "location", "Lisbon")}),
    ("I'm based in San Francisco.", U, {("identity", "user", "location", "San Francisco")}),
    ("i live in berlin", U, {("identity", "user", "location", "berlin")}),
    ("Mein Name ist Jürgen.", U, {("identity", "user", "name", "Jürgen")}),
    (
        "Je m'appelle Claire et j'habite à Lyon.",
        U,
        {
            ("identity", "user", "name", "Claire"),
            ("identity", "user", "location", "Lyon"),
        },
    ),
    (
        "Me llamo Diego y vivo en Madrid.",
        U,
        {
            ("identity", "user", "name", "Diego"),
            ("identity", "user", "location", "Madrid"),
        },
    ),
    ("Ich wohne in München.", U, {("identity", "user", "location", "München")}),
    ("I'm from Brazil.", U, {("identity", "user", "origin", "Brazil")}),
    ("My email is alice@example.com", U, {("identity", "user", "email", "alice@example.com")}),
    ("I'm German.", U, {("identity", "user", "nationality", "German")}),
    (
        "Hi! My name is Priya. I live in Toronto and I work at Shopify.",
        U,
        {
            ("identity", "user", "name", "Priya"),
            ("identity", "user", "location", "Toronto"),
            ("identity", "user", "employer", "Shopify"),
        },
    ),
    # identity: negatives
    ("I'm not sure about that.", U, set()),
    ("I'm going to refactor the parser.", U, set()),
    ("I'm happy with the result.", U, set()),
    ("I'm sorry, I meant the other file.", U, set()),
    ("My friend's name is Bob.", U, set()),
    ("What's your name?", U, set()),
    ("My name is Hermes, how can I help?", A, set()),
    ("You live in Berlin, right?", A, set()),
    ("I'm in a meeting right now.", U, set()),
    ("Call me when you're done.", U, set()),
    ("I live in fear of merge conflicts.", U, set()),
    ("I used to live in Paris.", U, set()),
    ("If I moved to Berlin, I'd need a visa.", U, set()),
    ("My wife is from Spain.", U, set()),
    # preferences and dislikes
    (
        "I love Rust but hate Java.",
        U,
        {
            ("preference", "user", "likes", "Rust"),
            ("dislike", "user", "dislikes", "Java"),
        },
    ),
    ("I prefer tabs over spaces.", U, {("preference", "user", "likes", "tabs")}),
    ("I really like dark mode.", U, {("preference", "user", "likes", "dark mode")}),
    ("I don't like long meetings.", U, {("dislike", "user", "dislikes", "long meetings")}),
    ("I can't stand YAML.", U, {("dislike", "user", "dislikes", "YAML")}),
    ("My favourite editor is Helix.", U, {("preference", "user", "favorite:editor", "Helix")}),
    (
        "I like Python, Go and Zig.",
        U,
        {
            ("preference", "user", "likes", "Python"),
            ("preference", "user", "likes", "Go"),
            ("preference", "user", "likes", "Zig"),
        },
    ),
    ("I enjoy hiking on weekends.", U, {("preference", "user", "likes", "hiking on weekends")}),
    # preferences: negatives
    ("Do you like Python?", U, set()),
    ("Would you prefer tabs or spaces?", U, set()),
    ("I'd like you to fix the tests.", U, set()),
    ("I like it.", U, set()),
    ("I love that idea!", A, set()),
    ("I hate it when the build breaks.", U, set()),
    # tools and stack
    (
        "We use PostgreSQL and Redis.",
        U,
        {
            ("tool", "project", "uses", "PostgreSQL"),
            ("tool", "project", "uses", "Redis"),
        },
    ),
    (
        "Our stack is FastAPI, Postgres and React.",
        U,
        {
            ("tool", "project", "uses", "FastAPI"),
            ("tool", "project", "uses", "Postgres"),
            ("tool", "project", "uses", "React"),
        },
    ),
    ("I'm using Neovim these days.", U, {("tool", "user", "uses", "Neovim")}),
    ("The service is deployed on Kubernetes.", U, {("tool", "project", "uses", "Kubernetes")}),
    ("We're using Terraform for infrastructure.", U, {("tool", "project", "uses", "Terraform")}),
    ("Do you use Docker?", U, set()),
    # decisions
    (
        "We decided to use Postgres for the queue.",
        U,
        {
            ("decision", "project", "decision:queue", "use Postgres for the queue"),
        },
    ),
    ("Let's go with option B.", U, {("decision", "project", "decision", "option B")}),
    (
        "Decision: ship the beta on Monday.",
        U,
        {
            ("decision", "project", "decision", "ship the beta on Monday"),
        },
    ),
    (
        "Let's go with Redis for caching.",
        A,
        {
            ("decision", "project", "decision:caching", "Redis for caching"),
        },
    ),
    (
        "We agreed to drop support for Python 3.8.",
        U,
        {
            ("decision", "project", "decision", "drop support for Python 3.8"),
        },
    ),
    ("I decided to quit my job.", U, {("decision", "user", "decision", "quit my job")}),
    # constraints
    ("Never force-push to main.", U, {("constraint", "project", "constraint", "Never force-push to main")}),
    (
        "Always run the tests before committing.",
        U,
        {
            ("constraint", "project", "constraint", "Always run the tests before committing"),
        },
    ),
    (
        "You must not store secrets in the repo.",
        U,
        {
            ("constraint", "project", "constraint", "You must not store secrets in the repo"),
        },
    ),
    (
        "Don't ever delete the production database.",
        U,
        {
            ("constraint", "project", "constraint", "Don't ever delete the production database"),
        },
    ),
    (
        "The API must stay backwards compatible.",
        U,
        {
            ("constraint", "api", "constraint", "The API must stay backwards compatible"),
        },
    ),
    ("It always crashes on startup.", U, set()),
    ("I never got the email.", U, set()),
    ("It must be the cache.", U, set()),
    # values
    ("The staging DB is at db.internal:5432.", U, {("value", "staging db", "host", "db.internal:5432")}),
    (
        "Grafana is at https://grafana.example.com/d/abc",
        U,
        {
            ("value", "grafana", "url", "https://grafana.example.com/d/abc"),
        },
    ),
    (
        "The config lives in /etc/memstream/config.json",
        U,
        {
            ("value", "config", "path", "/etc/memstream/config.json"),
        },
    ),
    ("Redis runs on port 6380.", U, {("value", "redis", "port", "6380")}),
    ("We're on Python 3.11.", U, {("value", "project", "version:python", "3.11")}),
    ("Bumped memstream to v2.3.1 yesterday.", U, {("value", "project", "version:memstream", "2.3.1")}),
    ("Check /var/log/syslog for errors.", U, {("value", "project", "mention:path", "/var/log/syslog")}),
    (
        "See https://docs.python.org/3/library/re.html",
        U,
        {
            ("value", "project", "mention:url", "https://docs.python.org/3/library/re.html"),
        },
    ),
    ("The API server listens on port 8080.", A, {("value", "api server", "port", "8080")}),
    ("It took 3.5 hours to finish.", U, set()),
    ("commit 9f2c1e7 fixed it", U, set()),
    ("I paid $3.50 for coffee.", U, set()),
    # terse notation
    ("C[deploy]: never on Fridays", U, {("constraint", "deploy", "constraint", "never on Fridays")}),
    ("D[db]: Postgres 16 on RDS", U, {("decision", "project", "decision:db", "Postgres 16 on RDS")}),
    (
        "V[staging.url]: https://staging.example.com",
        U,
        {
            ("value", "staging.url", "value", "https://staging.example.com"),
        },
    ),
    ("?[auth]: JWT or server sessions?", U, {("question", "auth", "question", "JWT or server sessions")}),
    ("✓[migration]: schema v2 applied", U, {("done", "migration", "done", "schema v2 applied")}),
    ("~[launch]: mid-March", U, {("tentative", "launch", "tentative", "mid-March")}),
    (
        "D[cache]: Redis\nC[cache]: TTL under 1h",
        U,
        {
            ("decision", "project", "decision:cache", "Redis"),
            ("constraint", "cache", "constraint", "TTL under 1h"),
        },
    ),
    ("V[api.port]: 8080", A, {("value", "api.port", "value", "8080")}),
    # notes
    (
        "Remember that the client demo is on Thursday.",
        U,
        {
            ("note", "user", "note", "the client demo is on Thursday"),
        },
    ),
]

HELD_OUT_CASES: list[tuple[str, str, set[tuple[str, str, str, str]]]] = [
    (
        "Hey there, I'm Tomasz and I'm a site reliability engineer.",
        U,
        {
            ("identity", "user", "name", "Tomasz"),
            ("identity", "user", "role", "site reliability engineer"),
        },
    ),
    ("By the way, I recently moved to Amsterdam for work.", U, {("identity", "user", "location", "Amsterdam")}),
    ("I've been living in Tokyo for three years.", U, {("identity", "user", "location", "Tokyo")}),
    ("My name's Kenji.", U, {("identity", "user", "name", "Kenji")}),
    (
        "I'm an indie game developer based in Montreal.",
        U,
        {
            ("identity", "user", "role", "indie game developer"),
            ("identity", "user", "location", "Montreal"),
        },
    ),
    ("These days I work for a small fintech startup.", U, set()),
    (
        "I am currently working at Deutsche Bank as a quant.",
        U,
        {
            ("identity", "user", "employer", "Deutsche Bank"),
            ("identity", "user", "role", "quant"),
        },
    ),
    ("I'm just curious how this works.", U, set()),
    ("I'm Going to need more time.", U, set()),
    ("I'm Still waiting on the build.", U, set()),
    ("My brother lives in Chicago.", U, set()),
    ("Where do you live?", U, set()),
    ("Are you based in Europe?", A, set()),
    ("I'm really into functional programming.", U, set()),
    ("Honestly, I absolutely love Elixir.", U, {("preference", "user", "likes", "Elixir")}),
    (
        "I really don't like tabs, and I hate trailing whitespace.",
        U,
        {
            ("dislike", "user", "dislikes", "tabs"),
            ("dislike", "user", "dislikes", "trailing whitespace"),
        },
    ),
    ("I'm not a fan of Jira.", U, {("dislike", "user", "dislikes", "Jira")}),
    ("My favorite language is OCaml.", U, {("preference", "user", "favorite:language", "OCaml")}),
    ("I would love to see an example.", U, set()),
    ("I like that you kept it short.", U, set()),
    (
        "We mostly use Go and gRPC internally.",
        U,
        {
            ("tool", "project", "uses", "Go"),
            ("tool", "project", "uses", "gRPC"),
        },
    ),
    ("Our backend runs on AWS Lambda.", U, {("tool", "project", "uses", "AWS Lambda")}),
    ("I use Emacs with evil mode.", U, {("tool", "user", "uses", "Emacs")}),
    (
        "We've settled on SQLite for local caching.",
        U,
        {
            ("decision", "project", "decision:local caching", "SQLite for local caching"),
        },
    ),
    ("OK, let's switch to pnpm.", U, {("decision", "project", "decision", "switch to pnpm")}),
    ("We'll go with the second approach.", A, {("decision", "project", "decision", "the second approach")}),
    ("Let's see what happens.", U, set()),
    (
        "Please never commit directly to the release branch.",
        U,
        {
            ("constraint", "project", "constraint", "never commit directly to the release branch"),
        },
    ),
    (
        "From now on, always answer in German.",
        U,
        {
            ("constraint", "project", "constraint", "always answer in German"),
        },
    ),
    ("Migrations must be reversible.", U, {("constraint", "migrations", "constraint", "Migrations must be reversible")}),
    ("He always forgets the semicolons.", U, set()),
    (
        "The metrics endpoint is http://10.0.3.7:9100/metrics.",
        U,
        {
            ("value", "metrics", "url", "http://10.0.3.7:9100/metrics"),
        },
    ),
    (
        "Prod Postgres lives at pg-prod.corp.internal:6432.",
        U,
        {
            ("value", "prod postgres", "host", "pg-prod.corp.internal:6432"),
        },
    ),
    (
        "Logs are written to /var/log/memstream/worker.log.",
        A,
        {
            ("value", "logs", "path", "/var/log/memstream/worker.log"),
        },
    ),
    ("We upgraded to Node 20 last week.", U, {("value", "project", "version:node", "20")}),
    ("The service needs about 2.5 GB of RAM.", U, set()),
    ("Version 1.4 of the SDK broke our build.", U, set()),
    ("Scored 4.5 out of 5 in the review.", U, set()),
    (
        "V[grafana.url]: https://grafana.corp.example.com",
        A,
        {
            ("value", "grafana.url", "value", "https://grafana.corp.example.com"),
        },
    ),
    ("- D[queue]: Redis Streams, not Kafka", U, {("decision", "project", "decision:queue", "Redis Streams, not Kafka")}),
    ("?[retention]: how long do we keep raw turns?", U, {("question", "retention", "question", "how long do we keep raw turns")}),
    ("~[deadline]: end of Q3, maybe later", A, {("tentative", "deadline", "tentative", "end of Q3, maybe later")}),
    (
        "Keep in mind that the staging cluster is shared with the data team.",
        U,
        {
            ("note", "user", "note", "the staging cluster is shared with the data team"),
        },
    ),
    ("Je vis à Bruxelles depuis 2019.", U, {("identity", "user", "location", "Bruxelles")}),
    ("Ich heiße Lukas.", U, {("identity", "user", "name", "Lukas")}),
]
