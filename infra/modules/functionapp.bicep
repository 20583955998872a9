// Hosting plan + Function App running the blog's custom handler (one Linux binary
// named `handler`, declared in host.json's customHandler section).
//
// Default: Flex Consumption (FC1, Linux) with functionAppConfig.runtime custom/1.0
// and the deployment package in a blob container read with the user-assigned identity.
// Fallback (hostingPlan = 'ElasticPremium'): for a region whose Flex Consumption offer
// lacks the custom runtime, an Elastic Premium (EP1, Linux) plan with the classic
// FUNCTIONS_WORKER_RUNTIME=custom / FUNCTIONS_EXTENSION_VERSION=~4 settings, running
// from a zip package (WEBSITE_RUN_FROM_PACKAGE=1) and no Azure Files content share,
// since shared-key access to the storage account is off.

@description('Function App name (globally unique host name prefix).')
param name string

@description('Hosting plan name.')
param planName string

@description('Azure region.')
param location string

@description('Tags applied to the resources.')
param tags object = {}

@description('FlexConsumption (default) or ElasticPremium (fallback where Flex does not offer the custom runtime).')
@allowed([
  'FlexConsumption'
  'ElasticPremium'
])
param hostingPlan string = 'FlexConsumption'

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

@description('Flex Consumption maximum number of instances.')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Elastic Premium maximum burst instance count (fallback plan only).')
@minValue(1)
@maxValue(100)
param maximumElasticWorkerCount int = 20

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

@description('Client id of the Microsoft Entra app registration for the API; empty: App Service authentication off.')
param authClientId string = ''

@description('Microsoft Entra tenant id of that app registration.')
param authTenantId string = ''

@description('Scopes a browser client asks for (space-separated); empty: api://<authClientId>/.default.')
param authScopes string = ''

var isFlex = hostingPlan == 'FlexConsumption'

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

// Settings shared by both plans. Every connection is identity-based: the host,
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
  // Who is calling: the principal App Service authentication vouches for. Without an app
  // registration authentication stays off and every write answers 401.
  {
    name: 'BLOG_AUTH'
    value: 'easyauth'
  }
]

var authEnabled = !empty(authClientId)
var authIssuer = '${environment().authentication.loginEndpoint}${authTenantId}/v2.0'

// Published to browser clients by GET /api/config: where and as what to sign in.
var authClientSettings = authEnabled ? [
  {
    name: 'BLOG_AUTH_ISSUER'
    value: authIssuer
  }
  {
    name: 'BLOG_AUTH_CLIENT_ID'
    value: authClientId
  }
  {
    name: 'BLOG_AUTH_SCOPES'
    value: empty(authScopes) ? 'api://${authClientId}/.default' : authScopes
  }
] : []

// Only for the fallback plan: Flex Consumption rejects these as app settings (its
// runtime comes from functionAppConfig and it always runs from its package).
var premiumSettings = [
  {
    name: 'FUNCTIONS_EXTENSION_VERSION'
    value: '~4'
  }
  {
    name: 'FUNCTIONS_WORKER_RUNTIME'
    value: 'custom'
  }
  {
    name: 'WEBSITE_RUN_FROM_PACKAGE'
    value: '1'
  }
]

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  #checkov:skip=CKV_AZURE_225:Flex Consumption scales per request from zero and zone redundancy is not offered for FC1 in every region; the API is stateless and the data lives in Cosmos DB.
  name: planName
  location: location
  tags: tags
  kind: isFlex ? 'functionapp' : 'elastic'
  sku: isFlex ? {
    name: 'FC1'
    tier: 'FlexConsumption'
  } : {
    name: 'EP1'
    tier: 'ElasticPremium'
  }
  properties: union({
    reserved: true
  }, isFlex ? {} : {
    maximumElasticWorkerCount: maximumElasticWorkerCount
  })
}

resource site 'Microsoft.Web/sites@2024-04-01' = {
  #checkov:skip=CKV_AZURE_17:A public JSON API called by browsers and scripts; clients do not hold TLS client certificates.
  #checkov:skip=CKV_AZURE_212:Consumption-style plans scale out on demand (and Flex scales to zero); a fixed worker count does not apply.
  #checkov:skip=CKV_AZURE_213:The Functions host manages instance health and replaces failed instances itself; a periodic health-check probe would keep the scale-to-zero plan from scaling in.
  #checkov:skip=CKV_AZURE_222:The blog API is public by design; there is no virtual network or private endpoint in front of it.
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
    reserved: true
    httpsOnly: true
    clientCertEnabled: false
    publicNetworkAccess: 'Enabled'
    functionAppConfig: isFlex ? flexAppConfig : null
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
      remoteDebuggingEnabled: false
      appSettings: concat(commonSettings, authClientSettings, isFlex ? [] : premiumSettings)
    }
  }
}

// App Service authentication with Microsoft Entra ID, only when an app registration is given.
// Anonymous requests pass through (reads are public; the app answers 401 to an anonymous
// write); a signed-in caller's principal reaches the app in the X-MS-CLIENT-PRINCIPAL* headers,
// which the platform strips from what clients send. Bearer tokens for the API (v1 audience
// api://<clientId>, v2 audience <clientId>) are validated here. No token store: the app needs
// no tokens, only the principal.
// checkov reads every sites/config as the site's web configuration (siteConfig); this one is
// authsettingsV2, which has none of those properties (they are set on the site above, or
// skipped there with reasons).
resource authSettings 'Microsoft.Web/sites/config@2024-04-01' = if (authEnabled) {
  #checkov:skip=CKV_AZURE_13:This resource turns App Service authentication on (authsettingsV2 platform.enabled); checkov looks only for the v1 authsettings property properties.enabled.
  #checkov:skip=CKV_AZURE_63:Not a web configuration: authsettingsV2 has no httpLoggingEnabled; logs go to Application Insights.
  #checkov:skip=CKV_AZURE_65:Not a web configuration: authsettingsV2 has no detailedErrorLoggingEnabled.
  #checkov:skip=CKV_AZURE_66:Not a web configuration: authsettingsV2 has no requestTracingEnabled.
  #checkov:skip=CKV_AZURE_80:Not a web configuration: authsettingsV2 has no netFrameworkVersion (and the app is a Linux custom handler).
  #checkov:skip=CKV_AZURE_88:Not a web configuration: authsettingsV2 has no azureStorageAccounts; the app keeps no files.
  #checkov:skip=CKV_AZURE_222:Not a web configuration: public network access belongs to the site (public by design, skipped there with its reason).
  parent: site
  name: 'authsettingsV2'
  properties: {
    platform: {
      enabled: true
    }
    globalValidation: {
      requireAuthentication: false
      unauthenticatedClientAction: 'AllowAnonymous'
    }
    httpSettings: {
      requireHttps: true
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          clientId: authClientId
          openIdIssuer: authIssuer
        }
        validation: {
          allowedAudiences: [
            'api://${authClientId}'
            authClientId
          ]
        }
      }
    }
    login: {
      tokenStore: {
        enabled: false
      }
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
