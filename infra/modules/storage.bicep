// Storage account used by the Functions host (AzureWebJobsStorage, identity-based)
// and for the Flex Consumption deployment package container. Shared-key access is
// disabled, so every caller must present a Microsoft Entra token.

@description('Storage account name (3-24 lowercase letters and digits).')
@minLength(3)
@maxLength(24)
param name string

@description('Azure region.')
param location string

@description('Tags applied to the resources.')
param tags object = {}

@description('Blob container that holds the deployment package.')
param deploymentContainerName string

@description('Principal (object) id of the identity the Functions host runs as.')
param hostPrincipalId string

@description('True: public network access off; the app reaches the account through private endpoints (modules/network.bicep).')
param privateNetworking bool = false

// Built-in roles the Functions host needs on its storage account when it connects
// with a managed identity (blob leases/keys, queues, tables).
var storageBlobDataOwnerRoleId = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var storageQueueDataContributorRoleId = '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
var storageTableDataContributorRoleId = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
var hostRoleIds = [
  storageBlobDataOwnerRoleId
  storageQueueDataContributorRoleId
  storageTableDataContributorRoleId
]

resource storage 'Microsoft.Storage/storageAccounts@2024-01-01' = {
  #checkov:skip=CKV_AZURE_35:Holds only with vnetEnabled=false (the default): the Function App then has no virtual network and reaches its host storage on the public endpoint, where shared keys are off and every request needs an Entra token with an RBAC role. With vnetEnabled=true the default action is Deny and access goes through private endpoints.
  #checkov:skip=CKV_AZURE_206:The account holds only Functions host state and the redeployable app package; locally redundant storage is enough and geo-replication would only add cost.
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    allowCrossTenantReplication: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: privateNetworking ? 'Disabled' : 'Enabled'
    networkAcls: {
      bypass: privateNetworking ? 'None' : 'AzureServices'
      defaultAction: privateNetworking ? 'Deny' : 'Allow'
    }
    encryption: {
      keySource: 'Microsoft.Storage'
      services: {
        blob: {
          enabled: true
        }
        file: {
          enabled: true
        }
        queue: {
          enabled: true
        }
        table: {
          enabled: true
        }
      }
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2024-01-01' = {
  parent: storage
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: 7
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      days: 7
    }
  }
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2024-01-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource hostRoles 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in hostRoleIds: {
  name: guid(storage.id, hostPrincipalId, roleId)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: hostPrincipalId
    principalType: 'ServicePrincipal'
  }
}]

output name string = storage.name
output id string = storage.id
output blobEndpoint string = storage.properties.primaryEndpoints.blob
output deploymentContainerUrl string = '${storage.properties.primaryEndpoints.blob}${deploymentContainerName}'
