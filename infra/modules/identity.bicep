// User-assigned managed identity shared by the Function App for every data-plane
// call it makes: host storage, Flex deployment storage, Cosmos DB and Application
// Insights ingestion. No keys or connection strings are issued to the app.

@description('Name of the user-assigned managed identity.')
param name string

@description('Azure region.')
param location string

@description('Tags applied to the resource.')
param tags object = {}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: name
  location: location
  tags: tags
}

output id string = identity.id
output name string = identity.name
output principalId string = identity.properties.principalId
output clientId string = identity.properties.clientId
