"""What dbt-sqe's tests start and connect with: sqe-server with the test identity provider's
users and an administrator's static token, and a dbt profile of the OAuth client `etl-service`."""

from servers import start_server

# An administrator's static token, for checks outside dbt (system.runtime.queries of every user).
ADMIN_TOKEN = "dbt-tests-admin-0123456789abcdef"


def start_sqe(directory, idp, tls=None):
    """sqe-server in `directory`, signing users in at `idp`; `tls`: (certificate, key) files."""
    auth = (
        (f'[server.tls]\ncert_file = "{tls[0]}"\nkey_file = "{tls[1]}"\n\n' if tls else "")
        + '[auth]\nallow_anonymous = false\nadmin_roles = ["sqe_admin"]\n\n'
        + f'[auth.oidc]\nissuer = "http://127.0.0.1:{idp.port}"\naudience = "sqe"\nclient_id = "sqe"\n\n'
        + '[[auth.static]]\nname = "admin"\ntoken_env = "ADMIN_TOKEN"\nroles = ["sqe_admin"]\n'
    )
    server = start_server(directory, auth, {"ADMIN_TOKEN": ADMIN_TOKEN})
    server.admin_token = ADMIN_TOKEN
    return server


def oauth_profile(sqe, idp, **more):
    """A dbt-sqe profile target: the OAuth client `etl-service` (client credentials) on `sqe`."""
    return {
        "type": "sqe",
        "method": "oauth",
        "host": "127.0.0.1",
        "port": sqe.flight_port,
        "token_uri": f"http://127.0.0.1:{idp.port}/token",
        "client_id": "etl-service",
        "client_secret": "etl-secret",
        "database": "iceberg",
        "threads": 1,
        **more,
    }
