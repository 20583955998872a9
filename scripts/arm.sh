# Azure Resource Manager calls for the azd hooks (source it): a token from the developer's azd
# sign-in (or the Azure CLI's), and one request at a time with curl. Nothing here is stored.
#
# Env:  AZURE_ARM_ENDPOINT   Resource Manager endpoint (default https://management.azure.com;
#                            another cloud's, e.g. https://management.usgovcloudapi.net)

ARM_ENDPOINT="${AZURE_ARM_ENDPOINT:-https://management.azure.com}"
ARM_ENDPOINT="${ARM_ENDPOINT%/}"

# arm_token: prints an access token for Resource Manager, or fails.
arm_token() {
    local token=""
    if command -v azd >/dev/null 2>&1; then
        # `azd auth token` gives the signed-in developer's token for the given scope. Every azd
        # azure.yaml allows answers `--output json` with {"token": ..., "expiresOn": ...}; the
        # plain token without it came only later, so the JSON form is the one asked for.
        token=$(azd auth token --output json --scope "$ARM_ENDPOINT//.default" 2>/dev/null |
            json_string token) || token=""
    fi
    if [ -z "$token" ] && command -v az >/dev/null 2>&1; then
        token=$(az account get-access-token --resource "$ARM_ENDPOINT/" --query accessToken -o tsv 2>/dev/null) || token=""
    fi
    [ -n "$token" ] || return 1
    printf '%s' "$token"
}

# arm_request METHOD PATH: sets ARM_STATUS (the HTTP status, 000 when unreachable) and ARM_BODY.
arm_request() {
    local method=$1 path=$2 out
    out=$(mktemp)
    ARM_STATUS=$(curl -sS -o "$out" -w '%{http_code}' -X "$method" --max-time 60 \
        -H "Authorization: Bearer $ARM_TOKEN" -H 'Content-Length: 0' \
        "$ARM_ENDPOINT$path" 2>/dev/null) || ARM_STATUS=${ARM_STATUS:-000}
    ARM_BODY=$(cat "$out")
    rm -f "$out"
}

# json_string NAME: the first string value of "NAME" in the JSON on stdin (enough for the flat
# fields read here; no JSON tool is assumed on the developer's machine).
json_string() {
    tr -d '\n' | sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"\\([^\"]*\\)\".*/\\1/p" | head -n 1
}

# json_field NAME: the first string value of "NAME" in ARM_BODY.
json_field() {
    printf '%s' "$ARM_BODY" | json_string "$1"
}
