// Private networking (main.bicep's vnetEnabled): a virtual network with two subnets, one the
// Function App integrates into (Flex Consumption's way: delegated to Microsoft.App/environments,
// /24 leaves room to scale out) and one for private endpoints; private endpoints with private DNS
// zones for Cosmos DB and for the storage account's blob, queue and table services. The accounts
// themselves turn public network access off when this module is deployed.

@description('Azure region.')
param location string

@description('Tags applied to the resources.')
param tags object = {}

@description('Virtual network name.')
param name string

@description('Address space of the virtual network.')
param addressPrefix string = '10.20.0.0/16'

@description('Subnet the Function App integrates into (at least /27; no other resource may use it).')
param appSubnetPrefix string = '10.20.1.0/24'

@description('Subnet of the private endpoints.')
param endpointSubnetPrefix string = '10.20.2.0/24'

@description('Storage account (AzureWebJobsStorage and the deployment package).')
param storageAccountId string

@description('Cosmos DB account.')
param cosmosAccountId string

var appSubnetName = 'app'
var endpointSubnetName = 'private-endpoints'

// One private endpoint per service the app reaches privately, each with the private DNS zone
// that resolves the service's usual host name to the endpoint's address inside the network.
var endpoints = [
  {
    name: 'cosmos'
    target: cosmosAccountId
    groupId: 'Sql'
    zone: 'privatelink.documents.azure.com'
  }
  {
    name: 'blob'
    target: storageAccountId
    groupId: 'blob'
    zone: 'privatelink.blob.${environment().suffixes.storage}'
  }
  {
    name: 'queue'
    target: storageAccountId
    groupId: 'queue'
    zone: 'privatelink.queue.${environment().suffixes.storage}'
  }
  {
    name: 'table'
    target: storageAccountId
    groupId: 'table'
    zone: 'privatelink.table.${environment().suffixes.storage}'
  }
]

resource vnet 'Microsoft.Network/virtualNetworks@2024-05-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        addressPrefix
      ]
    }
    subnets: [
      {
        name: appSubnetName
        properties: {
          addressPrefix: appSubnetPrefix
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
          // The app's outbound calls to the internet (the token issuer's signing keys,
          // Application Insights ingestion) leave through the network once it is integrated;
          // default outbound access keeps them working without a NAT gateway.
          defaultOutboundAccess: true
        }
      }
      {
        name: endpointSubnetName
        properties: {
          addressPrefix: endpointSubnetPrefix
          privateEndpointNetworkPolicies: 'Disabled'
          defaultOutboundAccess: false
        }
      }
    ]
  }
}

resource zones 'Microsoft.Network/privateDnsZones@2024-06-01' = [for e in endpoints: {
  name: e.zone
  location: 'global'
  tags: tags
  properties: {}
}]

resource links 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = [for (e, i) in endpoints: {
  parent: zones[i]
  name: '${name}-link'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}]

resource privateEndpoints 'Microsoft.Network/privateEndpoints@2024-05-01' = [for e in endpoints: {
  name: 'pe-${name}-${e.name}'
  location: location
  tags: tags
  properties: {
    subnet: {
      id: '${vnet.id}/subnets/${endpointSubnetName}'
    }
    privateLinkServiceConnections: [
      {
        name: '${e.name}-connection'
        properties: {
          privateLinkServiceId: e.target
          groupIds: [
            e.groupId
          ]
        }
      }
    ]
  }
}]

resource zoneGroups 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = [for (e, i) in endpoints: {
  parent: privateEndpoints[i]
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: e.name
        properties: {
          privateDnsZoneId: zones[i].id
        }
      }
    ]
  }
}]

output appSubnetId string = '${vnet.id}/subnets/${appSubnetName}'
