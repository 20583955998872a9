#!/usr/bin/env bash
# azd's predeploy hook of the `api` service. Flex Consumption stores the deployment package in
# its blob container with the app's identity, whose Storage Blob Data Owner role the same
# `azd up` has just assigned; a role assignment can take up to 10 minutes to take effect ("Assign
# an Azure role for access to blob data", Azure Storage docs), and a package upload before then
# fails with 403 (AuthorizationPermissionMismatch). azd does not retry a failed deployment, so
# this waits until the newest role assignment on the storage account is that old. Later deploys
# find it older and do not wait. When the assignments cannot be read, it says so and lets the
# deploy go on (a 403 then means: run `azd deploy` again in a few minutes).
#
# Env (azd passes the environment's values, the deployment outputs among them):
#      AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP, AZURE_STORAGE_ACCOUNT_NAME
#      ROLE_SETTLE_SECONDS   the age to wait for (default 600)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/arm.sh"

SETTLE=${ROLE_SETTLE_SECONDS:-600}
say() { printf 'predeploy: %s\n' "$*" >&2; }
give_up() {
    say "$*; not waiting for the app's storage role. If the deployment fails with 403, the role is not in effect yet: run azd deploy again in a few minutes."
    exit 0
}

for name in AZURE_SUBSCRIPTION_ID AZURE_RESOURCE_GROUP AZURE_STORAGE_ACCOUNT_NAME; do
    [ -n "${!name:-}" ] || give_up "$name is not set"
done
ARM_TOKEN=$(arm_token) || give_up "no Azure Resource Manager token"

scope="/subscriptions/$AZURE_SUBSCRIPTION_ID/resourceGroups/$AZURE_RESOURCE_GROUP/providers/Microsoft.Storage/storageAccounts/$AZURE_STORAGE_ACCOUNT_NAME"
arm_request GET "$scope/providers/Microsoft.Authorization/roleAssignments?api-version=2022-04-01&\$filter=atScope()"
[ "$ARM_STATUS" = 200 ] || give_up "reading the role assignments on $AZURE_STORAGE_ACCOUNT_NAME answered HTTP $ARM_STATUS"

# Seconds since the epoch of an ISO 8601 UTC time (GNU date, else BSD date).
epoch() {
    local t=${1%%.*}
    t=${t%Z}
    date -u -d "${t}Z" +%s 2>/dev/null || date -u -j -f '%Y-%m-%dT%H:%M:%S' "$t" +%s 2>/dev/null
}

newest=0
for created in $(printf '%s' "$ARM_BODY" | grep -o '"createdOn"[[:space:]]*:[[:space:]]*"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/'); do
    at=$(epoch "$created") || continue
    if [ "$at" -gt "$newest" ]; then
        newest=$at
    fi
done
[ "$newest" -gt 0 ] || give_up "no role assignment on $AZURE_STORAGE_ACCOUNT_NAME could be read"

age=$(($(date -u +%s) - newest))
if [ "$age" -lt "$SETTLE" ]; then
    left=$((SETTLE - age))
    say "the app's storage role was assigned ${age} s ago; waiting ${left} s more so that it is in effect before the package is uploaded (at most ${SETTLE} s after the assignment)"
    sleep "$left"
fi
