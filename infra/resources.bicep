// Everything the blog runs on, inside the resource group main.bicep creates: an Azure Functions
// custom handler (Linux binary `handler`) over Azure Cosmos DB for NoSQL. Managed identity
// everywhere: no account keys, connection strings or publishing passwords are created or stored.
// How to deploy: docs/deploy.md.

targetScope = 'resourceGroup'

@description('Azure region for every resource (main.bicep restricts it to Flex Consumption regions).')
param location string = resourceGroup().location

@description('Short prefix used in resource names: lowercase letters, digits and hyphens.')
@minLength(2)
@maxLength(10)
param baseName string = 'blog'

@description('Tags applied to every resource (main.bicep adds azd-env-name).')
param tags object

@description('Short unique token that makes the global resource names unique.')
param resourceToken string

@description('Service name azd deploys the Function App package as (its azd-service-name tag; azure.yaml names the same service).')
param serviceName string = 'api'

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

@description('Cosmos DB backup: Periodic (default; a copy every 4 hours, the last 2 kept, restored by a support request), Continuous7Days or Continuous30Days (point-in-time restore within the last 7 or 30 days, self-service). Moving from Periodic to continuous is one-way.')
@allowed([
  'Periodic'
  'Continuous7Days'
  'Continuous30Days'
])
param cosmosBackupMode string = 'Periodic'

@description('Cosmos DB database name.')
param cosmosDatabaseName string = 'blog'

@description('Optional Microsoft Entra object id of the deploying developer, granted Cosmos DB data access (azd passes AZURE_PRINCIPAL_ID). Empty: none.')
param principalId string = ''

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

@description('Optional client (application) id of a Microsoft Entra app registration for the API. Set: App Service authentication validates Entra sign-ins and bearer tokens for it and the app acts as the signed-in caller. Empty: authentication stays off, so every write answers 401 (reads stay public).')
param authClientId string = ''

@description('Microsoft Entra tenant of the app registration (default: this deployment\'s tenant).')
param authTenantId string = tenant().tenantId

@description('Scopes a browser client asks for when signing in, space-separated (published by GET /api/config). Empty: api://<authClientId>/<authWriteScope>.')
param authScopes string = ''

@description('The delegated scope (or app role) a token must carry to write (BLOG_AUTH_WRITE_SCOPE).')
@minLength(1)
param authWriteScope string = 'Blog.Write'

var suffix = resourceToken
var compactBase = toLower(replace(baseName, '-', ''))

var identityName = 'id-${baseName}-${suffix}'
var storageAccountName = take('st${compactBase}${suffix}', 24)
var logAnalyticsName = 'log-${baseName}-${suffix}'
var appInsightsName = 'appi-${baseName}-${suffix}'
var cosmosAccountName = toLower('cosmos-${baseName}-${suffix}')
var planName = 'plan-${baseName}-${suffix}'
var functionAppName = toLower('func-${baseName}-${suffix}')
var deploymentContainerName = 'app-package'
var vnetName = 'vnet-${baseName}-${suffix}'
var webPubSubName = toLower('wps-${baseName}-${suffix}')

var authEnabled = !empty(authClientId)

var cosmosPrincipalIds = concat([
  identity.outputs.principalId
], empty(principalId) ? [] : [
  principalId
])

@description('Serve the RealWorld ("Conduit") API under /api/conduit (BLOG_CONDUIT)')
param conduitEnabled bool = false

@description('Live updates through Azure Web PubSub (docs/live.md): the service, its role for the app\'s identity and BLOG_WEBPUBSUB_ENDPOINT. Off: none of it is deployed.')
param webPubSubEnabled bool = true

@description('Web PubSub tier: Free_F1 (default; 20 concurrent connections, 20,000 messages a day) or Standard_S1 (units of 1,000 connections).')
@allowed([
  'Free_F1'
  'Standard_S1'
])
param webPubSubSku string = 'Free_F1'

@description('Standard_S1 units of 1,000 concurrent connections each (Free_F1 has one).')
@minValue(1)
@maxValue(100)
param webPubSubCapacity int = 1

@secure()
@description('The key local accounts\' tokens are signed with (BLOG_TOKEN_KEY); empty: none set')
param tokenKey string = ''

module identity 'modules/identity.bicep' = {
  name: 'identity'
  params: {
    name: identityName
    location: location
    tags: tags
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    logAnalyticsName: logAnalyticsName
    appInsightsName: appInsightsName
    location: location
    tags: tags
    publisherPrincipalId: identity.outputs.principalId
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  params: {
    name: storageAccountName
    location: location
    tags: tags
    deploymentContainerName: deploymentContainerName
    hostPrincipalId: identity.outputs.principalId
    privateNetworking: vnetEnabled
  }
}

module cosmos 'modules/cosmos.bicep' = {
  name: 'cosmos'
  params: {
    accountName: cosmosAccountName
    location: location
    tags: tags
    databaseName: cosmosDatabaseName
    throughputMode: cosmosThroughputMode
    autoscaleMaxThroughput: autoscaleMaxThroughput
    backupMode: cosmosBackupMode
    dataContributorPrincipalIds: cosmosPrincipalIds
    privateNetworking: vnetEnabled
  }
}

module webPubSub 'modules/webpubsub.bicep' = if (webPubSubEnabled) {
  name: 'webpubsub'
  params: {
    name: webPubSubName
    location: location
    tags: tags
    skuName: webPubSubSku
    capacity: webPubSubCapacity
    ownerPrincipalId: identity.outputs.principalId
  }
}

module network 'modules/network.bicep' = if (vnetEnabled) {
  name: 'network'
  params: {
    name: vnetName
    location: location
    tags: tags
    storageAccountId: storage.outputs.id
    cosmosAccountId: cosmos.outputs.id
  }
}

module functionApp 'modules/functionapp.bicep' = {
  name: 'functionapp'
  params: {
    name: functionAppName
    planName: planName
    location: location
    tags: union(tags, {
      'azd-service-name': serviceName
    })
    instanceMemoryMB: instanceMemoryMB
    maximumInstanceCount: maximumInstanceCount
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.name
    deploymentContainerUrl: storage.outputs.deploymentContainerUrl
    appInsightsConnectionString: monitoring.outputs.appInsightsConnectionString
    cosmosEndpoint: cosmos.outputs.endpoint
    cosmosDatabaseName: cosmos.outputs.databaseName
    // The network module's outputs exist only when it is deployed; using them orders the app
    // after its private endpoints and DNS zones.
    virtualNetworkSubnetId: vnetEnabled ? network.outputs.appSubnetId : ''
    corsAllowedOrigins: corsAllowedOrigins
    authClientId: authClientId
    authTenantId: authTenantId
    authScopes: authScopes
    authWriteScope: authWriteScope
    conduitEnabled: conduitEnabled
    tokenKey: tokenKey
    // The module's output exists only when it is deployed; using it orders the app after the
    // service and its role assignment.
    webPubSubEndpoint: webPubSubEnabled ? webPubSub.outputs.endpoint : ''
  }
  // Using the storage, monitoring and cosmos outputs orders this module after those
  // deployments, role assignments included, so the host can reach storage, Cosmos DB
  // and Application Insights with its identity as soon as it first starts.
}

module workbook 'modules/workbook.bicep' = {
  name: 'workbook'
  params: {
    location: location
    tags: tags
    displayName: 'Blog (${baseName}-${suffix})'
    appInsightsId: monitoring.outputs.appInsightsId
    cosmosAccountId: cosmos.outputs.id
  }
}

module alerts 'modules/alerts.bicep' = if (alertsEnabled) {
  name: 'alerts'
  params: {
    location: location
    tags: tags
    baseName: '${baseName}-${suffix}'
    appInsightsId: monitoring.outputs.appInsightsId
    cosmosAccountId: cosmos.outputs.id
    alertEmail: alertEmail
    changeFeedLagThresholdMs: changeFeedLagThresholdMs
  }
}

output functionAppName string = functionApp.outputs.name
output apiBaseUrl string = 'https://${functionApp.outputs.defaultHostName}/api'
output cosmosEndpoint string = cosmos.outputs.endpoint
output cosmosDatabaseName string = cosmos.outputs.databaseName
output identityClientId string = identity.outputs.clientId
output storageAccountName string = storage.outputs.name
output deploymentContainerUrl string = storage.outputs.deploymentContainerUrl
// Where bearer tokens for the API come from and whom they are for (empty without an app
// registration); the postprovision hook gives the same pair to a local Functions host.
output authIssuer string = authEnabled ? '${environment().authentication.loginEndpoint}${authTenantId}/v2.0' : ''
output authAudience string = authClientId
output authWriteScope string = authEnabled ? authWriteScope : ''
