#!/usr/bin/env bash
# azd's postprovision hook: write local.settings.json from the outputs of infra/main.bicep, so
# that the Functions host runs locally (`func start` in dist/app) against the provisioned Cosmos DB
# account with the developer's own Microsoft Entra sign-in and nothing edited by hand.
#
# azd passes the environment's values (.azure/<env>/.env, the deployment outputs among them) to
# hooks as environment variables. Without azd, export the same names from
# `az deployment sub show -n <deployment> --query properties.outputs` and run it yourself.
#
# Env:  COSMOS_ENDPOINT, COSMOS_DATABASE   required (deployment outputs)
#       AUTH_ISSUER, AUTH_AUDIENCE,        optional outputs: set, the local host validates the same
#       AUTH_WRITE_SCOPE                   bearer tokens as the deployed app (BLOG_AUTH=jwt, and a
#                                          write needs the scope); empty, the request body names
#                                          the caller (BLOG_AUTH=none)
#       LOCAL_SETTINGS                     file to write (default: <repo>/local.settings.json)
# The file holds no secret: the host's own state goes to Azurite, and Cosmos DB is reached with
# the signed-in developer's token (the deployment gave AZURE_PRINCIPAL_ID the data role).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${LOCAL_SETTINGS:-$ROOT/local.settings.json}"

for name in COSMOS_ENDPOINT COSMOS_DATABASE; do
    if [ -z "${!name:-}" ]; then
        echo "postprovision: $name is not set (is this running as azd's postprovision hook?)" >&2
        exit 1
    fi
done

# A JSON string literal: backslashes and quotes escaped; control characters are refused, since no
# endpoint, name or URL carries one.
json_string() {
    case "$1" in
        *[[:cntrl:]]*)
            echo "postprovision: refusing a value with a control character" >&2
            exit 1
            ;;
    esac
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    printf '"%s"' "$s"
}

auth_lines() {
    if [ -n "${AUTH_ISSUER:-}" ] && [ -n "${AUTH_AUDIENCE:-}" ]; then
        printf '    "BLOG_AUTH": "jwt",\n'
        printf '    "BLOG_AUTH_ISSUER": %s,\n' "$(json_string "$AUTH_ISSUER")"
        if [ -n "${AUTH_WRITE_SCOPE:-}" ]; then
            printf '    "BLOG_AUTH_WRITE_SCOPE": %s,\n' "$(json_string "$AUTH_WRITE_SCOPE")"
        fi
        printf '    "BLOG_AUTH_AUDIENCE": %s\n' "$(json_string "$AUTH_AUDIENCE")"
    else
        # `func start` has no authentication in front of the app: the body's userId is the caller.
        printf '    "BLOG_AUTH": "none"\n'
    fi
}

tmp="$OUT.tmp.$$"
{
    printf '{\n  "IsEncrypted": false,\n  "Values": {\n'
    printf '    "FUNCTIONS_WORKER_RUNTIME": "custom",\n'
    printf '    "AzureWebJobsStorage": "UseDevelopmentStorage=true",\n'
    printf '    "BLOG_STORE": "cosmos",\n'
    printf '    "COSMOS__accountEndpoint": %s,\n' "$(json_string "$COSMOS_ENDPOINT")"
    printf '    "COSMOS_DATABASE": %s,\n' "$(json_string "$COSMOS_DATABASE")"
    auth_lines
    printf '  }\n}\n'
} >"$tmp"
mv "$tmp" "$OUT"
echo "postprovision: wrote $OUT (Cosmos DB $COSMOS_ENDPOINT, database $COSMOS_DATABASE)"
