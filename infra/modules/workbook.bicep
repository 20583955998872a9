// One page to watch the blog by: an Azure Monitor workbook with requests, failures and latency
// (Application Insights), request units and throttled requests (Cosmos DB metrics) and the
// change-feed lag each applied batch reports (`lag_ms=` in the trigger functions' traces). A workbook costs nothing
// to keep, so it is always deployed; it opens from the Application Insights resource
// (Workbooks) or the resource group.

@description('Azure region.')
param location string

@description('Tags applied to the resource.')
param tags object = {}

@description('Display name of the workbook.')
param displayName string

@description('Application Insights component the queries run against.')
param appInsightsId string

@description('Cosmos DB account whose metrics are charted.')
param cosmosAccountId string

var last24h = {
  durationMs: 86400000
}

// Log query tile over Application Insights, charted over time.
var queryTile = {
  type: 3
  content: {
    version: 'KqlItem/1.0'
    queryType: 0
    resourceType: 'microsoft.insights/components'
    visualization: 'timechart'
    timeContext: last24h
    size: 0
  }
}

var cosmosMetric = {
  type: 10
  content: {
    version: 'MetricsItem/2.0'
    chartType: 2
    size: 0
    resourceType: 'microsoft.documentdb/databaseaccounts'
    metricScope: 0
    resourceIds: [
      cosmosAccountId
    ]
    timeContext: last24h
  }
}

var notebook = {
  version: 'Notebook/1.0'
  isLocked: false
  fallbackResourceIds: [
    appInsightsId
  ]
  items: [
    {
      type: 1
      name: 'title'
      content: {
        json: '## ${displayName}\nRequests, failures and latency of every function; Cosmos DB request units and throttled (429) requests; and how far behind its newest change each applied change-feed batch was.'
      }
    }
    union(queryTile, {
      name: 'requests'
      content: union(queryTile.content, {
        title: 'Requests and failures (every function, per 5 minutes)'
        query: 'requests | summarize requests = count(), failures = countif(success == false), http5xx = countif(toint(resultCode) >= 500) by bin(timestamp, 5m)'
      })
    })
    union(queryTile, {
      name: 'latency'
      content: union(queryTile.content, {
        title: 'Latency of the HTTP functions, ms (median and 95th percentile)'
        query: 'requests | where isnotempty(url) | summarize p50 = percentile(duration, 50), p95 = percentile(duration, 95) by bin(timestamp, 5m)'
      })
    })
    union(cosmosMetric, {
      name: 'request-units'
      content: union(cosmosMetric.content, {
        title: 'Cosmos DB request units'
        metrics: [
          {
            namespace: 'microsoft.documentdb/databaseaccounts'
            metric: 'microsoft.documentdb/databaseaccounts-Requests-TotalRequestUnits'
            aggregation: 1
          }
        ]
      })
    })
    union(cosmosMetric, {
      name: 'throttled'
      content: union(cosmosMetric.content, {
        title: 'Cosmos DB requests by status code (429: throttled)'
        metrics: [
          {
            namespace: 'microsoft.documentdb/databaseaccounts'
            metric: 'microsoft.documentdb/databaseaccounts-Requests-TotalRequests'
            aggregation: 7
            splitBy: 'StatusCode'
          }
        ]
      })
    })
    union(queryTile, {
      name: 'lag'
      content: union(queryTile.content, {
        title: 'Change-feed lag, ms (largest per 5 minutes, by function)'
        query: 'traces | where tostring(customDimensions.Category) in ("Function.PostsChangeFeed.User", "Function.UsersChangeFeed.User", "Function.PostsTimeline.User", "Function.UsersTimeline.User") | where message contains "lag_ms=" | extend lag_ms = tolong(extract(@"lag_ms=(\\d+)", 1, message)), function = tostring(split(tostring(customDimensions.Category), ".")[1]) | where isnotnull(lag_ms) | summarize max(lag_ms) by function, bin(timestamp, 5m)'
      })
    })
    union(queryTile, {
      name: 'quarantined'
      content: union(queryTile.content, {
        title: 'Quarantined changes (per 5 minutes, by function)'
        query: 'traces | where message has "quarantined=" | extend function = tostring(split(message, ":")[0]) | summarize count() by function, bin(timestamp, 5m)'
      })
    })
  ]
}

resource dashboard 'Microsoft.Insights/workbooks@2023-06-01' = {
  name: guid(resourceGroup().id, appInsightsId, 'blog-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: displayName
    category: 'workbook'
    sourceId: appInsightsId
    serializedData: string(notebook)
  }
}

output id string = dashboard.id
