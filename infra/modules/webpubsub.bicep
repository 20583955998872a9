// Azure Web PubSub: the push service of live updates under the Functions host (docs/live.md).
// The change-feed triggers send each change's event to a group over the service's REST API, and
// GET /api/events/negotiate asks it for a client's WebSocket URL, both with a Microsoft Entra
// token of the app's identity: access keys are off.

@description('Name of the Web PubSub service (its host is <name>.webpubsub.azure.com).')
param name string

@description('Azure region.')
param location string

@description('Tags applied to the resources.')
param tags object = {}

@description('Free_F1 (20 concurrent connections, 20,000 messages a day, no SLA) or Standard_S1 (units of 1,000 connections).')
@allowed([
  'Free_F1'
  'Standard_S1'
])
param skuName string = 'Free_F1'

@description('Standard_S1 units (1,000 concurrent connections each); Free_F1 has one.')
@minValue(1)
@maxValue(100)
param capacity int = 1

@description('Principal (object) id of the app\'s identity, which sends messages and asks for client tokens.')
param ownerPrincipalId string

// Web PubSub Service Owner: the data-plane REST API (send to groups, generate client tokens).
var serviceOwnerRoleId = '12cf5a90-567b-43ae-8102-96cf46c7d9b4'

resource webPubSub 'Microsoft.SignalRService/webPubSub@2024-03-01' = {
  #checkov:skip=CKV_AZURE_175:Free_F1 (no SLA) is the default because live updates are best-effort hints a page refetches after (docs/live.md); the webPubSubSku parameter picks Standard_S1, which has one.
  #checkov:skip=CKV_AZURE_176:The service calls no Azure resource (no upstream event handler, no shared private link): the app calls it with its own identity, so an identity of the service's would be unused.
  name: name
  location: location
  tags: tags
  kind: 'WebPubSub'
  sku: {
    name: skuName
    tier: skuName == 'Free_F1' ? 'Free' : 'Standard'
    capacity: skuName == 'Free_F1' ? 1 : capacity
  }
  properties: {
    // Only Microsoft Entra tokens: no access key can send or sign a client token.
    disableLocalAuth: true
    disableAadAuth: false
    // Browsers connect from anywhere with the client token negotiate gives them.
    publicNetworkAccess: 'Enabled'
  }
}

resource serviceOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(webPubSub.id, ownerPrincipalId, serviceOwnerRoleId)
  scope: webPubSub
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceOwnerRoleId)
    principalId: ownerPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output endpoint string = 'https://${webPubSub.properties.hostName}'
output name string = webPubSub.name
