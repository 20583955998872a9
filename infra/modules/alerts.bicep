// Alerts on what goes wrong in production, to one action group (e-mail optional): failed
// function executions, HTTP 5xx answers, Cosmos DB throttling (429), change-feed lag and
// quarantined changes (the `quarantined=` line an applied batch hands the host per change).
// Deployed only when main.bicep's alertsEnabled is true.
//
// The function-level alerts query Application Insights, where the Functions host records every
// execution (HTTP functions and the change-feed triggers alike) in `requests`; host.json keeps
// requests out of sampling, so the counts are whole. The lag comes from the line each applied
// change-feed batch hands the host ("...; lag_ms=<n>"), which lands in `traces` under the
// trigger function's own log category, Function.<name>.User. The handler's stdout reaches
// `traces` too (category Host.Function.Console) and names lag_ms as well, so the query reads only
// the two trigger functions' categories.

@description('Azure region of the log alerts (metric alerts and the action group are global).')
param location string

@description('Tags applied to the resources.')
param tags object = {}

@description('Short prefix used in names.')
param baseName string

@description('Application Insights component the Function App reports to.')
param appInsightsId string

@description('Cosmos DB account.')
param cosmosAccountId string

@description('E-mail address the action group notifies. Empty: the alerts fire into an action group without receivers (visible in the portal only).')
param alertEmail string = ''

@description('Change-feed lag, in milliseconds, above which the lag alert fires.')
@minValue(1000)
param changeFeedLagThresholdMs int = 60000

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = {
  name: 'ag-${baseName}'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: take('${baseName}ops', 12)
    enabled: true
    emailReceivers: empty(alertEmail) ? [] : [
      {
        name: 'operator'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

// Log alerts over Application Insights: name, what they count, and when they fire.
var logAlerts = [
  {
    name: 'failed-executions'
    displayName: 'Failed function executions'
    description: 'A function execution failed: a change-feed batch was not applied (the retry policy redelivers it; repeated failures hold back its part of the feed), or the host got no answer from the handler.'
    severity: 1
    query: 'requests | where success == false'
    timeAggregation: 'Count'
    measure: ''
    threshold: 0
  }
  {
    name: 'http-5xx'
    displayName: 'HTTP 5xx answers'
    description: 'The API answered with a server error (5xx).'
    severity: 1
    query: 'requests | where toint(resultCode) >= 500'
    timeAggregation: 'Count'
    measure: ''
    threshold: 0
  }
  {
    name: 'change-feed-lag'
    displayName: 'Change-feed lag'
    description: 'An applied change-feed batch was further behind its newest change than the threshold: the projections (feed, post copies, counters) are falling behind the writes.'
    severity: 2
    query: 'traces | where tostring(customDimensions.Category) in ("Function.PostsChangeFeed.User", "Function.UsersChangeFeed.User", "Function.PostsTimeline.User", "Function.UsersTimeline.User") | where message contains "lag_ms=" | extend lag_ms = tolong(extract(@"lag_ms=(\\d+)", 1, message)) | where isnotnull(lag_ms)'
    timeAggregation: 'Maximum'
    measure: 'lag_ms'
    threshold: changeFeedLagThresholdMs
  }
  {
    name: 'quarantined'
    displayName: 'Quarantined change-feed changes'
    description: 'A change could not be applied after 5 deliveries of its batch and was quarantined (the lane moved on). See it with handler verify or handler quarantine list; replay or drop it (docs/operations.md).'
    severity: 2
    query: 'traces | where message has "quarantined="'
    timeAggregation: 'Count'
    measure: ''
    threshold: 0
  }
]

resource logRules 'Microsoft.Insights/scheduledQueryRules@2022-08-01-preview' = [for alert in logAlerts: {
  name: 'alert-${baseName}-${alert.name}'
  location: location
  tags: tags
  properties: {
    displayName: alert.displayName
    description: alert.description
    severity: alert.severity
    enabled: true
    scopes: [
      appInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: alert.query
          timeAggregation: alert.timeAggregation
          metricMeasureColumn: empty(alert.measure) ? null : alert.measure
          operator: 'GreaterThan'
          threshold: alert.threshold
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: [
        actionGroup.id
      ]
    }
  }
}]

// Cosmos DB answers 429 when the account's throughput (or a serverless partition's) is
// exhausted; the handler retries and, past that, answers 429 / 503 with Retry-After.
resource throttling 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'alert-${baseName}-cosmos-throttling'
  location: 'global'
  tags: tags
  properties: {
    description: 'Cosmos DB throttled requests (status 429): the workload needs more request units than the account gives it.'
    severity: 2
    enabled: true
    scopes: [
      cosmosAccountId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'throttled'
          metricNamespace: 'Microsoft.DocumentDB/databaseAccounts'
          metricName: 'TotalRequests'
          dimensions: [
            {
              name: 'StatusCode'
              operator: 'Include'
              values: [
                '429'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Count'
        }
      ]
    }
    autoMitigate: true
    actions: [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}

output actionGroupId string = actionGroup.id
