"""redact(): secrets become [REDACTED:<kind>]; ordinary text is left exactly as it was.

Every secret below is a made-up value in the provider's format, not a real credential.
"""

from __future__ import annotations

import json

import pytest

from memstream.text.redaction import SECRET_KINDS, redact

# (text, secret that must disappear, kind)
SECRETS = [
    ("key sk-proj-AbC123def456GHI789jkl012MNO345pqr678 ok", "sk-proj-AbC123def456GHI789jkl012MNO345pqr678", "openai_key"),
    (
        "OPENAI_API_KEY=sk-AbC123def456GHI789jkl012MNO345pqr678stu901vw",
        "sk-AbC123def456GHI789jkl012MNO345pqr678stu901vw",
        "openai_key",
    ),
    (
        "use sk-ant-api03-AbC123def456GHI789jkl012MNO345pqr678stu901-xyz_AA now",
        "sk-ant-api03-AbC123def456GHI789jkl012MNO345pqr678stu901-xyz_AA",
        "anthropic_key",
    ),
    ("token ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456 here", "ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456", "github_token"),
    ("gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "github_token"),
    (
        "pat github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "github_token",
    ),
    ("slack xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp", "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp", "slack_token"),
    ("xoxp-1234567890-0987654321-AbCdEf", "xoxp-1234567890-0987654321-AbCdEf", "slack_token"),
    ("stripe sk_live_51HAbCdEfGhIjKlMnOpQrStUv", "sk_live_51HAbCdEfGhIjKlMnOpQrStUv", "stripe_key"),
    ("restricted rk_live_51HAbCdEfGhIjKlMnOpQrStUv", "rk_live_51HAbCdEfGhIjKlMnOpQrStUv", "stripe_key"),
    ("maps AIzaSyA1234567890abcdefghijklmnopqrstuv.", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "google_api_key"),
    ("HF_TOKEN hf_AbCdEfGhIjKlMnOpQrStUvWxYz12345678", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz12345678", "hf_token"),
    ("id AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "aws_access_key_id"),
    ("temp ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A", "aws_access_key_id"),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_key",
    ),
    (
        'AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_key",
    ),
    (
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFy==;EndpointSuffix=core.windows.net",
        "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFy==",
        "azure_key",
    ),
    (
        "https://acct.blob.core.windows.net/c/b?sv=2021-08-06&sig=AbCdEf%2BGhIjKlMnOpQrStUvWx%3D",
        "AbCdEf%2BGhIjKlMnOpQrStUvWx%3D",
        "azure_key",
    ),
    ("curl -H 'Authorization: Bearer abcDEF123456ghiJKL' https://api.example.com", "abcDEF123456ghiJKL", "bearer"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==", "bearer"),
    ("send it with Bearer 9f8e7d6c5b4a39281706f5e4", "9f8e7d6c5b4a39281706f5e4", "bearer"),
    (
        "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "jwt",
    ),
    ("password=hunter2 please", "hunter2", "secret"),
    ("db_password: 'correct horse'", "correct horse", "secret"),
    ('{"client_secret": "zq81-Xx_aa"}', "zq81-Xx_aa", "secret"),
    ("API_KEY=abcd1234efgh5678", "abcd1234efgh5678", "secret"),
    ("run it with --password S3cret! now", "S3cret!", "secret"),
    ('{"clientSecret": "abc123xyz", "region": "eu"}', "abc123xyz", "secret"),
    ("accessToken=ya29.a0AfH6SMBx", "ya29.a0AfH6SMBx", "secret"),
    ("aws secret_access_key: abcdefgh12345678abcdefgh1234", "abcdefgh12345678abcdefgh1234", "secret"),
]


@pytest.mark.parametrize(("text", "secret", "kind"), SECRETS)
def test_a_known_secret_shape_is_replaced_by_a_mark_of_its_kind(text, secret, kind):
    out, n = redact(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert n >= 1


def test_every_kind_named_here_is_a_documented_kind():
    # every kind is produced by the labelled corpus too (test_redaction_corpus.py)
    assert {kind for _, _, kind in SECRETS} <= set(SECRET_KINDS)


# What the generic rules add, each with its exact output (the name, the user and the host
# are kept; only the secret becomes a mark). Made-up values.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cache: redis://:hunter2pass@cache.internal:6379/0", "cache: redis://:[REDACTED:url_password]@cache.internal:6379/0"),
        ("PGPASSWORD=Winter#1 psql -h db", "PGPASSWORD=[REDACTED:secret] psql -h db"),
        ("the password is hunter2 btw", "the password is [REDACTED:secret] btw"),
        ("the password for the staging box is Sunsh1ne!", "the password for the staging box is [REDACTED:secret]"),
        ("mysql -u root -pS3cretPw app", "mysql -u root -p[REDACTED:secret] app"),
        ("curl -u admin:pa55word https://x.example.com", "curl -u admin:[REDACTED:secret] https://x.example.com"),
        ("docker run -u 1000:1000 -p 8080:80 nginx", "docker run -u 1000:1000 -p 8080:80 nginx"),
        ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBGX1\n-----END PGP PRIVATE KEY BLOCK-----", "[REDACTED:private_key]"),
        ("-----BEGIN rsa private key-----\nMIIEow\n-----END rsa private key-----", "[REDACTED:private_key]"),
        ("ghp_abcdefghijklmnopqrstuvwxyzABCDEF12345", "[REDACTED:github_token]"),  # one short
        ("glpat-Ab3dEf6hIj9lMn2pQr5t", "[REDACTED:gitlab_token]"),
        ("npm_Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7j", "[REDACTED:npm_token]"),
        ("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", "[REDACTED:sendgrid_key]"),
        ("SK0123456789abcdef0123456789abcdef", "[REDACTED:twilio_key]"),
        ("123456789:AAHb3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fG", "[REDACTED:telegram_token]"),
        ("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", "[REDACTED:google_oauth]"),
        ("MTIzNDU2Nzg5MDEyMzQ1Njc4.Gh7jKl.Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7j", "[REDACTED:discord_token]"),
        ("the key is 3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "the key is [REDACTED:secret]"),
        ("token:\nghp_Ab3dEf6hIj9lMn\n2pQr5tUv8xYz1bCd4fGh7jK", "token:\n[REDACTED:secret]"),
        ("token ghp_Ab3dEf6hIj9l\u200bMn2pQr5tUv8xYz1bCd4fGh7jK", "token [REDACTED:github_token]"),
        ("here: ghp_Ab3dЕf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7jK", "here: [REDACTED:github_token]"),  # a Cyrillic Е
        (
            "new keys: AKIAABCDEFGHIJKLMNOP / wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE12",
            "new keys: [REDACTED:aws_access_key_id] / [REDACTED:aws_secret_key]",
        ),
        ('<add key="APP_SECRET" value="x9Kq2LmN4pR7sT0v" />', '<add key="APP_SECRET" value="[REDACTED:secret]" />'),
    ],
)
def test_the_generic_rules_redact_only_the_secret(text, expected):
    out, n = redact(text)
    assert out == expected
    assert n == out.count("[REDACTED:")


@pytest.mark.parametrize(
    "text",
    [
        "token = os.environ['GITHUB_TOKEN']  # read at start",
        "const secret = process.env.JWT_SECRET;",
        "private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)",
        "password = ${DB_PASSWORD}",
        "The cache key is user:42:profile and the idempotency key is 7c9e6679-7425-40de-944b-079f4c3d5b1d.",
        "Пароль от почты я сменил, ключ от квартиры у соседа.",
        "the key takeaway: ship smaller changes",
    ],
)
def test_code_references_and_ordinary_uses_are_left_alone(text):
    assert redact(text) == (text, 0)


def test_a_url_password_is_redacted_but_user_and_host_are_kept():
    out, n = redact("connect to postgres://admin:s3cr3t!@db.internal:5432/app then retry")
    assert out == "connect to postgres://admin:[REDACTED:url_password]@db.internal:5432/app then retry"
    assert n == 1


def test_a_pem_private_key_is_redacted_as_one_block():
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1b2c3\nd4e5f6==\n-----END RSA PRIVATE KEY-----"
    out, n = redact(f"here:\n{key}\nthanks")
    assert out == "here:\n[REDACTED:private_key]\nthanks"
    assert n == 1


def test_a_pem_private_key_cut_off_before_its_end_line_is_redacted_to_the_end():
    out, _ = redact("key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n[… clipped by memstream]")
    assert "b3BlbnNzaC1rZXktdjEAAAAA" not in out
    assert out.startswith("key:\n[REDACTED:private_key]")


def test_a_public_key_or_certificate_is_not_a_secret():
    text = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----"
    assert redact(text) == (text, 0)


def test_a_gcp_service_account_key_loses_its_private_key_and_stays_valid_json():
    doc = {
        "type": "service_account",
        "project_id": "demo-project",
        "private_key_id": "0123456789abcdef0123456789abcdef01234567",
        "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n",
        "client_email": "bot@demo-project.iam.gserviceaccount.com",
    }
    out, n = redact(json.dumps(doc))
    parsed = json.loads(out)
    assert parsed["private_key"] == "[REDACTED:private_key]"
    assert parsed["client_email"] == doc["client_email"]
    assert n == 1


def test_forty_base64_characters_without_an_aws_name_nearby_are_left_alone():
    text = "checksum wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY in the manifest"
    assert redact(text) == (text, 0)


@pytest.mark.parametrize(
    "text",
    [
        "commit 9f2c1e7a3b4d5e6f708192a3b4c5d6e7f8091a2b fixed it (short 9f2c1e7)",
        "request id 123e4567-e89b-12d3-a456-426614174000 failed",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "set max_tokens=200 and num_tokens: 512 in the config",
        "The token: it expires hourly. The password field is required.",
        "Reset your password: click the link. The secret sauce is love.",
        "He was the bearer of bad news, and the task-ask-skills flow is risk-based.",
        "use https://example.com/path?q=1 and ssh://git@github.com/org/repo.git",
        "email bob@example.com about the sk-learn and scikit-learn upgrade",
        "def get_token(self): return self._token  # token = None",
        "Authorization header missing; see docs for the Bearer scheme.",
        "我们的密码策略需要更新。パスワードを変更してください。",
        "bypass: some_value1, compass=north_1, primaryKey: user_id",
    ],
)
def test_ordinary_text_comes_back_unchanged(text):
    out, n = redact(text)
    assert out == text
    assert n == 0


def test_text_without_secrets_is_returned_as_the_same_object():
    text = "nothing to see here, just a plan for Tuesday"
    assert redact(text)[0] is text


def test_redaction_is_idempotent():
    text = " ".join(t for t, _, _ in SECRETS) + " postgres://u:pw1234@h/db"
    once, n = redact(text)
    assert n >= len(SECRETS)
    assert redact(once) == (once, 0)


def test_the_count_is_the_number_of_marks():
    text = "a=sk-AbC123def456GHI789jkl012MNO345 b=ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456 c AKIAIOSFODNN7EXAMPLE"
    out, n = redact(text)
    assert n == out.count("[REDACTED:") == 3


def test_empty_text_is_empty():
    assert redact("") == ("", 0)
