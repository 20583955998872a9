// Cosmos DB (NoSQL API) account, the blog database and its five containers, and
// data-plane RBAC. Key-based auth is disabled: the app and (optionally) a developer
// reach the data with Microsoft Entra tokens through the built-in Data Contributor role.

@description('Cosmos DB account name (3-44 lowercase letters, digits and hyphens).')
@minLength(3)
@maxLength(44)
param accountName string

@description('Azure region (single-region account).')
param location string

@description('Tags applied to the resources.')
param tags object = {}

@description('SQL database name.')
param databaseName string

@description('serverless: pay per request (capability EnableServerless). autoscale: provisioned autoscale throughput shared by all containers of the database.')
@allowed([
  'serverless'
  'autoscale'
])
param throughputMode string

@description('Maximum RU/s of the shared autoscale throughput (used only when throughputMode is autoscale).')
@minValue(1000)
param autoscaleMaxThroughput int

@description('Periodic: the service default (a backup every 240 minutes, two kept, in geo-redundant backup storage, or locally redundant in a region without a paired region; restored through a support request). Continuous7Days / Continuous30Days: continuous backup with self-service point-in-time restore within that window. Periodic to continuous is a one-way migration.')
@allowed([
  'Periodic'
  'Continuous7Days'
  'Continuous30Days'
])
param backupMode string = 'Periodic'

@description('Principal (object) ids granted the Cosmos DB Built-in Data Contributor role on the account.')
param dataContributorPrincipalIds array

@description('True: public network access off; the app reaches the account through a private endpoint (modules/network.bicep).')
param privateNetworking bool = false

var isServerless = throughputMode == 'serverless'

// Regions without a paired region, where geo-redundant backup storage does not exist: Cosmos DB
// takes only Local or Zone redundancy there ("Azure region pairs and nonpaired regions", Azure
// reliability docs). Every region main.bicep allows that has no pair must be listed here.
var nonPairedRegions = [
  'austriaeast'
  'belgiumcentral'
  'chilecentral'
  'indonesiacentral'
  'israelcentral'
  'italynorth'
  'malaysiawest'
  'mexicocentral'
  'newzealandnorth'
  'polandcentral'
  'qatarcentral'
  'spaincentral'
]

var backupPolicy = backupMode == 'Periodic' ? {
  type: 'Periodic'
  periodicModeProperties: {
    backupIntervalInMinutes: 240
    backupRetentionIntervalInHours: 8
    backupStorageRedundancy: contains(nonPairedRegions, toLower(location)) ? 'Local' : 'Geo'
  }
} : {
  type: 'Continuous'
  continuousModeProperties: {
    tier: backupMode == 'Continuous30Days' ? 'Continuous30Days' : 'Continuous7Days'
  }
}

// Cosmos DB Built-in Data Contributor (data-plane role definition).
var dataContributorRoleDefinitionId = '00000000-0000-0000-0000-000000000002'

// Paths the blog's queries filter or sort on; everything else is excluded to keep
// writes cheap. "/*" must appear in either the included or the excluded paths.
var excludeAll = [
  {
    path: '/*'
  }
  {
    path: '/"_etag"/?'
  }
]

// WHERE c.type = 'post' ORDER BY c.creationDate DESC is served by this composite index.
var typeThenNewest = [
  [
    {
      path: '/type'
      order: 'ascending'
    }
    {
      path: '/creationDate'
      order: 'descending'
    }
  ]
]

// Full-text search (FullTextContains) reads only the paths a container's full-text policy
// names; the containers other than posts name none.
var noFullText = {
  defaultLanguage: 'en-US'
  fullTextPaths: []
}

var containers = [
  {
    // Users and their own posts: WHERE c.type = 'post' ORDER BY c.creationDate DESC,
    // WHERE c.type = 'post' AND c.userUsername != @name; a batch's authors across partitions:
    // WHERE c.type = 'user' AND ARRAY_CONTAINS(@ids, c.userId); follow edges: by refUserId;
    // the timeline lane's job items; timeline entries an earlier release kept here (by
    // refUserId and postId) until they are moved to `timelines`.
    name: 'users'
    fullTextPolicy: noFullText
    partitionKey: '/userId'
    indexingPolicy: {
      indexingMode: 'consistent'
      automatic: true
      includedPaths: [
        {
          path: '/type/?'
        }
        {
          path: '/userId/?'
        }
        {
          path: '/refUserId/?'
        }
        {
          path: '/postId/?'
        }
        {
          path: '/creationDate/?'
        }
        {
          path: '/userUsername/?'
        }
        {
          path: '/deleted/?'
        }
      ]
      excludedPaths: excludeAll
      compositeIndexes: typeThenNewest
    }
  }
  {
    // Posts with their comments and likes: filter on type ordered by creationDate,
    // cross-partition by userId with userUsername != @name,
    // SELECT VALUE COUNT(1) ... WHERE c.type = 'like'; search across partitions:
    // FullTextContains(c.title, @w) OR FullTextContains(c.content, @w) OR
    // FullTextContains(c.tags, @w) for each word, through the full-text policy and indexes on
    // title, content and tags (docs/scale.md, search).
    name: 'posts'
    partitionKey: '/postId'
    fullTextPolicy: {
      defaultLanguage: 'en-US'
      fullTextPaths: [
        {
          path: '/title'
        }
        {
          path: '/content'
        }
        {
          path: '/tags'
        }
      ]
    }
    indexingPolicy: {
      indexingMode: 'consistent'
      automatic: true
      includedPaths: [
        {
          path: '/type/?'
        }
        {
          path: '/creationDate/?'
        }
        {
          path: '/userId/?'
        }
        {
          path: '/userUsername/?'
        }
        {
          path: '/deleted/?'
        }
      ]
      excludedPaths: excludeAll
      compositeIndexes: typeThenNewest
      fullTextIndexes: [
        {
          path: '/title'
        }
        {
          path: '/content'
        }
        {
          path: '/tags'
        }
      ]
    }
  }
  {
    // Materialized feed: WHERE c.type = 'post' ORDER BY c.creationDate DESC in its one partition;
    // each tag's posts in partition 'tag:<tag>' ORDER BY c.creationDate DESC; the tags' counts in
    // partition 'tagCount', WHERE c.postCount != 0 ORDER BY c.creationDate DESC.
    name: 'feed'
    fullTextPolicy: noFullText
    partitionKey: '/type'
    indexingPolicy: {
      indexingMode: 'consistent'
      automatic: true
      includedPaths: [
        {
          path: '/type/?'
        }
        {
          path: '/creationDate/?'
        }
        {
          path: '/postCount/?'
        }
      ]
      excludedPaths: excludeAll
    }
  }
  {
    // Personal timelines: entries and merge markers in the reader's partition,
    // WHERE c.type = 'timeline' ORDER BY c.creationDate DESC; a post's entries across
    // partitions by postId, an author's by refUserId (with userUsername != @name for a
    // rename), markers told apart by merge. No trigger follows this container: the timeline
    // lane writes it, nothing projects from it.
    name: 'timelines'
    fullTextPolicy: noFullText
    partitionKey: '/userId'
    indexingPolicy: {
      indexingMode: 'consistent'
      automatic: true
      includedPaths: [
        {
          path: '/type/?'
        }
        {
          path: '/creationDate/?'
        }
        {
          path: '/refUserId/?'
        }
        {
          path: '/postId/?'
        }
        {
          path: '/userUsername/?'
        }
        {
          path: '/merge/?'
        }
        {
          path: '/deleted/?'
        }
      ]
      excludedPaths: excludeAll
      compositeIndexes: typeThenNewest
    }
  }
  {
    // Lease container of the Functions Cosmos DB trigger (createLeaseContainerIfNotExists
    // is false, so it must exist). The trigger's lease manager queries it, so it keeps
    // the default consistent indexing of every path.
    name: 'leases'
    fullTextPolicy: noFullText
    partitionKey: '/id'
    indexingPolicy: {
      indexingMode: 'consistent'
      automatic: true
      includedPaths: [
        {
          path: '/*'
        }
      ]
      excludedPaths: [
        {
          path: '/"_etag"/?'
        }
      ]
    }
  }
]

resource account 'Microsoft.DocumentDB/databaseAccounts@2025-10-15' = {
  #checkov:skip=CKV_AZURE_101:Holds only with vnetEnabled=false (the default): the Function App then has no virtual network and reaches Cosmos DB on the public endpoint, where key auth is off and every request needs an Entra token with a data-plane role. With vnetEnabled=true publicNetworkAccess is Disabled and the app goes through a private endpoint.
  name: accountName
  location: location
  tags: tags
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    consistencyPolicy: {
      defaultConsistencyLevel: 'Session'
    }
    locations: [
      {
        locationName: location
        failoverPriority: 0
        isZoneRedundant: false
      }
    ]
    // Full-text search (the posts' full-text policy and indexes) is an account capability.
    capabilities: isServerless ? [
      {
        name: 'EnableServerless'
      }
      {
        name: 'EnableNoSQLFullTextSearch'
      }
    ] : [
      {
        name: 'EnableNoSQLFullTextSearch'
      }
    ]
    backupPolicy: backupPolicy
    disableLocalAuth: true
    disableKeyBasedMetadataWriteAccess: true
    minimalTlsVersion: 'Tls12'
    enableMultipleWriteLocations: false
    enableAutomaticFailover: false
    enableFreeTier: false
    publicNetworkAccess: privateNetworking ? 'Disabled' : 'Enabled'
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2025-10-15' = {
  parent: account
  name: databaseName
  properties: {
    resource: {
      id: databaseName
    }
    // Serverless accounts take no throughput; autoscale throughput is shared by the
    // five containers at database level (one autoscale setting instead of five).
    options: isServerless ? {} : {
      autoscaleSettings: {
        maxThroughput: autoscaleMaxThroughput
      }
    }
  }
}

resource sqlContainers 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2025-10-15' = [for c in containers: {
  parent: database
  name: c.name
  properties: {
    resource: {
      id: c.name
      partitionKey: {
        paths: [
          c.partitionKey
        ]
        kind: 'Hash'
        version: 2
      }
      indexingPolicy: c.indexingPolicy
      fullTextPolicy: c.fullTextPolicy
      // Time to live on, with no default expiry (-1): only items that carry a `ttl` expire.
      // A deleted user, post, comment or like is marked (`deleted: true`, `ttl`) for the change
      // feed to carry, and Cosmos DB removes the mark when it expires.
      defaultTtl: -1
    }
    options: {}
  }
}]

// One at a time: Cosmos DB rejects concurrent RBAC writes on the same account.
@batchSize(1)
resource dataContributors 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2025-10-15' = [for principalId in dataContributorPrincipalIds: {
  parent: account
  name: guid(account.id, principalId, dataContributorRoleDefinitionId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataContributorRoleDefinitionId}'
    principalId: principalId
    scope: account.id
  }
}]

output accountName string = account.name
output id string = account.id
output endpoint string = account.properties.documentEndpoint
output databaseName string = database.name
