// Blog backend on Azure: a resource group holding an Azure Functions custom handler (Linux binary
// `handler`) over Azure Cosmos DB for NoSQL (infra/resources.bicep). Subscription scope, as azd
// templates are, so `azd up` creates the group and `azd down` deletes all of it.
//
//   azd up                                                   (docs/deploy.md)
//   az deployment sub create -l <region> -f infra/main.bicep \
//     -p environmentName=<name> location=<region>            (the path without azd)

targetScope = 'subscription'

@description('Name of the environment (azd sets AZURE_ENV_NAME): names the resource group and seeds the unique resource names.')
@minLength(1)
@maxLength(64)
param environmentName string

@description('Azure region for every resource: one that offers Flex Consumption. The list is the official Flex Consumption azd template\'s (Azure-Samples/functions-quickstart-dotnet-azd, infra/main.bicep, February 2026) without its canary region; check a region with az functionapp list-flexconsumption-locations and az functionapp list-flexconsumption-runtimes --location <region> --runtime custom (docs/deploy.md).')
@minLength(1)
@allowed([
  'australiaeast'
  'australiasoutheast'
  'brazilsouth'
  'canadacentral'
  'centralindia'
  'centralus'
  'eastasia'
  'eastus'
  'eastus2'
  'francecentral'
  'germanywestcentral'
  'italynorth'
  'japaneast'
  'koreacentral'
  'northcentralus'
  'northeurope'
  'norwayeast'
  'southafricanorth'
  'southcentralus'
  'southeastasia'
  'southindia'
  'spaincentral'
  'swedencentral'
  'uaenorth'
  'uksouth'
  'ukwest'
  'westcentralus'
  'westeurope'
  'westus'
  'westus2'
  'westus3'
])
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Resource group to create. Empty: rg-<environmentName>.')
param resourceGroupName string = ''

@description('Microsoft Entra object id of the deploying developer (azd sets AZURE_PRINCIPAL_ID): granted Cosmos DB data access for running the handler or the Functions host locally against the account. Empty: nobody but the app.')
param principalId string = ''

@description('Short prefix used in resource names: lowercase letters, digits and hyphens.')
@minLength(2)
@maxLength(10)
param baseName string = 'blog'

@description('Flex Consumption instance memory size in MB.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Flex Consumption maximum instance count of each per-function scale group (the HTTP functions, and each change-feed trigger on its own).')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 100

@description('Cosmos DB capacity: serverless (default, pay per request) or autoscale (provisioned throughput shared by the database containers).')
@allowed([
  'serverless'
  'autoscale'
])
param cosmosThroughputMode string = 'serverless'

@description('Maximum RU/s of the shared autoscale throughput (only when cosmosThroughputMode is autoscale; scales between 10% and 100% of it).')
@minValue(1000)
param autoscaleMaxThroughput int = 1000

@description('Cosmos DB backup: Periodic (default), Continuous7Days or Continuous30Days. Moving from Periodic to continuous is one-way.')
@allowed([
  'Periodic'
  'Continuous7Days'
  'Continuous30Days'
])
param cosmosBackupMode string = 'Periodic'

@description('Cosmos DB database name.')
param cosmosDatabaseName string = 'blog'

@description('Private networking: a virtual network the Function App integrates into, private endpoints (with private DNS zones) for Cosmos DB and the storage account\'s blob, queue and table services, and public network access off on both accounts. Off (default): none of it is deployed and both accounts take Entra-authenticated traffic on their public endpoints.')
param vnetEnabled bool = false

@description('Alerts (failed executions, HTTP 5xx, Cosmos DB throttling, change-feed lag) and their action group. Off: none of them is deployed.')
param alertsEnabled bool = false

@description('E-mail address the alerts notify (only with alertsEnabled). Empty: an action group without receivers.')
param alertEmail string = ''

@description('Change-feed lag, in milliseconds, above which the lag alert fires (only with alertsEnabled).')
@minValue(1000)
param changeFeedLagThresholdMs int = 60000

@description('Browser origins allowed to call the API from another origin (e.g. https://app.example.com); the Function App\'s platform CORS answers them. Empty: no cross-origin access.')
param corsAllowedOrigins array = []

@description('Optional client (application) id of the API\'s Microsoft Entra app registration. Empty: no caller can be identified, so every write answers 401 (reads stay public).')
param authClientId string = ''

@description('Microsoft Entra tenant of the app registration (default: this deployment\'s tenant).')
param authTenantId string = tenant().tenantId

@description('Scopes a browser client asks for when signing in, space-separated (published by GET /api/config). Empty: api://<authClientId>/<authWriteScope>.')
param authScopes string = ''

@description('The delegated scope (or app role) a token must carry to write: the scope the app registration of docs/identity.md defines. Tokens for the audience without it are refused writes (403); ID tokens are refused altogether.')
@minLength(1)
param authWriteScope string = 'Blog.Write'

var tags = {
  'azd-env-name': environmentName
  app: 'blog'
}
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))

resource rg 'Microsoft.Resources/resourceGroups@2022-09-01' = {
  name: empty(resourceGroupName) ? 'rg-${environmentName}' : resourceGroupName
  location: location
  tags: tags
}

@description('Serve the RealWorld ("Conduit") API under /api/conduit (the app setting BLOG_CONDUIT); its functions are deployed either way and answer 404 while it is off')
param conduitEnabled bool = false

@secure()
@description('The key local accounts\' tokens are signed with (BLOG_TOKEN_KEY): a P-256 private key in PKCS#8 form, base64, the same on every instance. Empty: none is set, and each instance signs with a key of its own (tokens then hold only on the instance that issued them)')
param tokenKey string = ''

@description('Live updates through Azure Web PubSub (docs/live.md): the service, the app identity\'s Web PubSub Service Owner role and the app setting BLOG_WEBPUBSUB_ENDPOINT. Off: none of it is deployed')
param webPubSubEnabled bool = true

@description('Web PubSub tier: Free_F1 (20 concurrent connections, 20,000 messages a day) or Standard_S1 (units of 1,000 concurrent connections)')
@allowed([
  'Free_F1'
  'Standard_S1'
])
param webPubSubSku string = 'Free_F1'

@description('Standard_S1 units of 1,000 concurrent connections each (Free_F1 has one)')
@minValue(1)
@maxValue(100)
param webPubSubCapacity int = 1

module resources 'resources.bicep' = {
  name: 'resources'
  scope: rg
  params: {
    location: location
    tags: tags
    resourceToken: resourceToken
    baseName: baseName
    principalId: principalId
    instanceMemoryMB: instanceMemoryMB
    maximumInstanceCount: maximumInstanceCount
    cosmosThroughputMode: cosmosThroughputMode
    autoscaleMaxThroughput: autoscaleMaxThroughput
    cosmosBackupMode: cosmosBackupMode
    cosmosDatabaseName: cosmosDatabaseName
    corsAllowedOrigins: corsAllowedOrigins
    authClientId: authClientId
    authTenantId: authTenantId
    authScopes: authScopes
    authWriteScope: authWriteScope
    vnetEnabled: vnetEnabled
    alertsEnabled: alertsEnabled
    alertEmail: alertEmail
    changeFeedLagThresholdMs: changeFeedLagThresholdMs
    conduitEnabled: conduitEnabled
    tokenKey: tokenKey
    webPubSubEnabled: webPubSubEnabled
    webPubSubSku: webPubSubSku
    webPubSubCapacity: webPubSubCapacity
  }
}

// azd writes these to .azure/<environment>/.env; scripts/postprovision.sh turns them into
// local.settings.json.
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = resources.outputs.functionAppName
output API_BASE_URL string = resources.outputs.apiBaseUrl
output COSMOS_ENDPOINT string = resources.outputs.cosmosEndpoint
output COSMOS_DATABASE string = resources.outputs.cosmosDatabaseName
output AZURE_MANAGED_IDENTITY_CLIENT_ID string = resources.outputs.identityClientId
output AZURE_STORAGE_ACCOUNT_NAME string = resources.outputs.storageAccountName
output AUTH_ISSUER string = resources.outputs.authIssuer
output AUTH_AUDIENCE string = resources.outputs.authAudience
output AUTH_WRITE_SCOPE string = resources.outputs.authWriteScope
