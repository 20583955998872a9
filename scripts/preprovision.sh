#!/usr/bin/env bash
# azd's preprovision hook. With private networking on (VNET_ENABLED true, or 1, t, ...), the
# Function App integrates into a subnet delegated to Microsoft.App/environments, which the Microsoft.App
# resource provider must be registered for in the subscription (the Flex Consumption plan
# documents it; a new subscription has it unregistered). This registers it, waits until it is,
# and stops the provisioning with what to do when it cannot. Without private networking it does
# nothing.
#
# Env (azd passes the environment's values): VNET_ENABLED, AZURE_SUBSCRIPTION_ID
#      PROVIDER_WAIT_SECONDS   how long to wait for the registration (default 300)
#      PROVIDER_POLL_SECONDS   between two looks (default 10)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/arm.sh"

# VNET_ENABLED as azd reads it into the vnetEnabled parameter (Go's strconv.ParseBool): a value
# that turns the network on must also run this check, and one that is neither true nor false
# stops here with what to set.
case "${VNET_ENABLED:-false}" in
    1 | t | T | true | True | TRUE) ;;
    0 | f | F | false | False | FALSE) exit 0 ;;
    *)
        printf 'preprovision: VNET_ENABLED is %s, which is neither true nor false (1, t, T, TRUE, true, True or 0, f, F, FALSE, false, False): azd env set VNET_ENABLED true, or false\n' "'$VNET_ENABLED'" >&2
        exit 1
        ;;
esac

NS=Microsoft.App
API=2021-04-01
WAIT=${PROVIDER_WAIT_SECONDS:-300}
POLL=${PROVIDER_POLL_SECONDS:-10}
SUB=${AZURE_SUBSCRIPTION_ID:-}
say() { printf 'preprovision: %s\n' "$*" >&2; }
fix() {
    say "Ask someone with Contributor or Owner on the subscription to run"
    say "    az provider register --namespace $NS --subscription ${SUB:-<subscription id>}"
    say "(or in the portal: the subscription, Resource providers, $NS, Register), then run"
    say "azd provision again; or provision without private networking: azd env set VNET_ENABLED false."
}

if [ -z "$SUB" ]; then
    say "AZURE_SUBSCRIPTION_ID is not set, so the $NS resource provider (needed with VNET_ENABLED=true) cannot be checked."
    fix
    exit 1
fi
if ! ARM_TOKEN=$(arm_token); then
    say "no Azure Resource Manager token (neither 'azd auth token' nor 'az account get-access-token' gave one), so the $NS resource provider cannot be checked."
    fix
    exit 1
fi

provider="/subscriptions/$SUB/providers/$NS"
arm_request GET "$provider?api-version=$API"
state=$(json_field registrationState)
if [ "$ARM_STATUS" != 200 ]; then
    say "reading the $NS resource provider answered HTTP $ARM_STATUS: $(json_field message)"
    fix
    exit 1
fi
if [ "$state" = Registered ]; then
    exit 0
fi

say "registering the $NS resource provider in subscription $SUB (private networking delegates a subnet to $NS/environments); it was ${state:-not registered}"
arm_request POST "$provider/register?api-version=$API"
if [ "$ARM_STATUS" != 200 ]; then
    say "registering $NS was refused (HTTP $ARM_STATUS: $(json_field code)): registering a resource provider needs the $NS/register/action permission on the subscription."
    fix
    exit 1
fi
start=$SECONDS
while :; do
    arm_request GET "$provider?api-version=$API"
    state=$(json_field registrationState)
    if [ "$state" = Registered ]; then
        say "$NS is registered"
        exit 0
    fi
    if [ $((SECONDS - start)) -ge "$WAIT" ]; then
        say "$NS is still ${state:-not registered} after ${WAIT} s; registration can take a few minutes: run azd provision again in a while."
        exit 1
    fi
    sleep "$POLL"
done
