// Flex Consumption plan (FC1, Linux) + Function App running the blog's custom handler (one
// Linux binary named `handler`, declared in host.json's customHandler section), with
// functionAppConfig.runtime custom/1.0 and the deployment package in a blob container read with
// the user-assigned identity.
//
// Flex Consumption takes its runtime, package and scale settings from functionAppConfig only:
// the app settings FUNCTIONS_WORKER_RUNTIME, FUNCTIONS_EXTENSION_VERSION,
// WEBSITE_RUN_FROM_PACKAGE and WEBSITE_CONTENT*, and the site properties siteConfig.ftpsState and
// reserved, are listed as not valid there, so none is set. (Its platform has no FTP endpoint;
// basic publishing credentials are off below.)

@description('Function App name (globally unique host name prefix).')
param name string

@description('Hosting plan name.')
param planName string

@description('Azure region.')
param location string

@description('Tags applied to the resources.')
param tags object = {}

@description('Flex Consumption runtime name; custom = custom handler.')
param runtimeName string = 'custom'

@description('Flex Consumption runtime version of the custom handler stack.')
param runtimeVersion string = '1.0'

@description('Flex Consumption instance memory size in MB.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Flex Consumption maximum number of instances of each per-function scale group (the HTTP functions, and each change-feed trigger on its own).')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 100

@description('Resource id of the user-assigned identity.')
param identityId string

@description('Client id of the user-assigned identity.')
param identityClientId string

@description('Host storage account name (AzureWebJobsStorage, identity-based).')
param storageAccountName string

@description('URL of the blob container that holds the Flex Consumption deployment package.')
param deploymentContainerUrl string

@description('Application Insights connection string (an identifier; local auth is disabled).')
param appInsightsConnectionString string

@description('Cosmos DB account endpoint.')
param cosmosEndpoint string

@description('Cosmos DB database name.')
param cosmosDatabaseName string

@description('Subnet the app integrates into (delegated to Microsoft.App/environments). Empty: no virtual network integration.')
param virtualNetworkSubnetId string = ''

@description('Browser origins the platform answers CORS for. No cookies are involved (writes carry a bearer token), so credentials stay off.')
param corsAllowedOrigins array = []

@description('Client id of the Microsoft Entra app registration for the API; empty: no caller can be identified and every write answers 401.')
param authClientId string = ''

@description('Microsoft Entra tenant id of that app registration.')
param authTenantId string = ''

@description('Scopes a browser client asks for (space-separated); empty: api://<authClientId>/<authWriteScope>.')
param authScopes string = ''

@description('The delegated scope (or app role) a token must carry to write: the scope the API\'s app registration defines (docs/identity.md defines Blog.Write).')
@minLength(1)
param authWriteScope string = 'Blog.Write'

var flexAppConfig = {
  deployment: {
    storage: {
      type: 'blobContainer'
      value: deploymentContainerUrl
      authentication: {
        type: 'UserAssignedIdentity'
        userAssignedIdentityResourceId: identityId
      }
    }
  }
  scaleAndConcurrency: {
    instanceMemoryMB: instanceMemoryMB
    maximumInstanceCount: maximumInstanceCount
  }
  runtime: {
    name: runtimeName
    version: runtimeVersion
  }
}

// Every connection is identity-based: the host,
// the Cosmos DB trigger/bindings (connection prefix COSMOS) and the app itself use
// the user-assigned identity; nothing here is a secret.
var commonSettings = [
  {
    name: 'AzureWebJobsStorage__accountName'
    value: storageAccountName
  }
  {
    name: 'AzureWebJobsStorage__credential'
    value: 'managedidentity'
  }
  {
    name: 'AzureWebJobsStorage__clientId'
    value: identityClientId
  }
  {
    name: 'APPLICATIONINSIGHTS_CONNECTION_STRING'
    value: appInsightsConnectionString
  }
  {
    name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'
    value: 'ClientId=${identityClientId};Authorization=AAD'
  }
  {
    name: 'COSMOS__accountEndpoint'
    value: cosmosEndpoint
  }
  {
    name: 'COSMOS__credential'
    value: 'managedidentity'
  }
  {
    name: 'COSMOS__clientId'
    value: identityClientId
  }
  {
    name: 'COSMOS_DATABASE'
    value: cosmosDatabaseName
  }
  {
    name: 'BLOG_STORE'
    value: 'cosmos'
  }
]

@description('Serve the RealWorld ("Conduit") API under /api/conduit (BLOG_CONDUIT)')
param conduitEnabled bool = false

@secure()
@description('The key local accounts\' tokens are signed with (BLOG_TOKEN_KEY); empty: none set')
param tokenKey string = ''

@description('https://<name>.webpubsub.azure.com, where live updates are pushed (BLOG_WEBPUBSUB_ENDPOINT); empty: none')
param webPubSubEndpoint string = ''

// Live updates through Web PubSub, reached with the app's identity (the one COSMOS__clientId
// names); the hub keeps its default name.
var webPubSubSettings = empty(webPubSubEndpoint) ? [] : [
  {
    name: 'BLOG_WEBPUBSUB_ENDPOINT'
    value: webPubSubEndpoint
  }
]

// The RealWorld API and its accounts: on or off, and the one key every instance signs tokens
// with (a secure parameter, kept by App Service as an app setting, encrypted at rest).
var conduitSettings = concat([
  {
    name: 'BLOG_CONDUIT'
    value: conduitEnabled ? 'true' : 'false'
  }
], empty(tokenKey) ? [] : [
  {
    name: 'BLOG_TOKEN_KEY'
    value: tokenKey
  }
])

var authEnabled = !empty(authClientId)
var authIssuer = '${environment().authentication.loginEndpoint}${authTenantId}/v2.0'

// Who is calling: the app validates Microsoft Entra access tokens for the API itself (v2 tokens:
// `iss` is the tenant's v2.0 issuer, `aud` the registration's client id), so the deployment does
// not hinge on the platform's authentication module and its headers. The browser client signs in
// under the same client id, so a token for the audience alone proves too little: a write needs the
// registration's delegated scope (or an app role of that name) in `scp`/`roles`, which only an
// access token for the API carries, and the app refuses ID tokens. Without an app registration
// no token can be valid: BLOG_AUTH=easyauth with the platform's authentication off identifies
// nobody, so every write answers 401 and the start-up log says why.
var authSettings = authEnabled ? [
  {
    name: 'BLOG_AUTH'
    value: 'jwt'
  }
  {
    name: 'BLOG_AUTH_ISSUER'
    value: authIssuer
  }
  {
    name: 'BLOG_AUTH_AUDIENCE'
    value: authClientId
  }
  // Published to browser clients by GET /api/config: as what to sign in.
  {
    name: 'BLOG_AUTH_CLIENT_ID'
    value: authClientId
  }
  {
    name: 'BLOG_AUTH_SCOPES'
    value: empty(authScopes) ? 'api://${authClientId}/${authWriteScope}' : authScopes
  }
  {
    name: 'BLOG_AUTH_WRITE_SCOPE'
    value: authWriteScope
  }
] : [
  {
    name: 'BLOG_AUTH'
    value: 'easyauth'
  }
]

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  #checkov:skip=CKV_AZURE_225:Flex Consumption scales per request from zero and zone redundancy is not offered for FC1 in every region; the API is stateless and the data lives in Cosmos DB.
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    // Linux: set on the plan (the site's own `reserved` is not valid on Flex Consumption).
    reserved: true
  }
}

resource site 'Microsoft.Web/sites@2024-04-01' = {
  #checkov:skip=CKV_AZURE_17:A public JSON API called by browsers and scripts; clients do not hold TLS client certificates.
  #checkov:skip=CKV_AZURE_212:Consumption-style plans scale out on demand (and Flex scales to zero); a fixed worker count does not apply.
  #checkov:skip=CKV_AZURE_213:The Functions host manages instance health and replaces failed instances itself; a periodic health-check probe would keep the scale-to-zero plan from scaling in.
  #checkov:skip=CKV_AZURE_222:The blog API is public by design, with or without vnetEnabled (private networking makes the app's own outbound traffic private, not its API); reads are anonymous and writes need an Entra token.
  #checkov:skip=CKV_AZURE_78:siteConfig.ftpsState is not valid on Flex Consumption, whose apps have no FTP deployment; basic publishing credentials (ftp and scm) are disabled below.
  name: name
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    clientCertEnabled: false
    publicNetworkAccess: 'Enabled'
    functionAppConfig: flexAppConfig
    virtualNetworkSubnetId: empty(virtualNetworkSubnetId) ? null : virtualNetworkSubnetId
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      http20Enabled: true
      remoteDebuggingEnabled: false
      // The platform answers preflights and adds the CORS headers before the handler runs.
      cors: {
        allowedOrigins: corsAllowedOrigins
        supportCredentials: false
      }
      appSettings: concat(commonSettings, authSettings, conduitSettings, webPubSubSettings)
    }
  }
}

// No basic (user/password) publishing credentials: deployments authenticate with
// Microsoft Entra ID (az CLI / Core Tools sign-in).
resource ftpPublishing 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'ftp'
  properties: {
    allow: false
  }
}

resource scmPublishing 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'scm'
  properties: {
    allow: false
  }
}

output name string = site.name
output defaultHostName string = site.properties.defaultHostName
