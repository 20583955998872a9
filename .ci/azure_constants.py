"""Values Azure accepts where its resource definitions only say "string", pinned with their sources.

.ci/arm_types.py checks the templates against these lists. Each list is a copy of the named
document at the date given; a value missing here fails the check until it is added from that
document (never from memory), so that a misspelt or invented value cannot pass.
"""

from __future__ import annotations

# Azure RBAC built-in roles: role definition id -> role name.
# Source: "Azure built-in roles", learn.microsoft.com/azure/role-based-access-control/built-in-roles
# (MicrosoftDocs/azure-docs articles/role-based-access-control/built-in-roles.md, ms.date
# 04/09/2026): the Privileged and General sections, and the roles of the services a Functions +
# Cosmos DB + Storage + Monitor deployment touches (Storage, Web and Mobile, Databases, Monitor).
AZURE_BUILT_IN_ROLES: dict[str, str] = {
    # Privileged, General
    "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner",
    "f58310d9-a9f6-439a-9e8d-f62e7b41a168": "Role Based Access Control Administrator",
    "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9": "User Access Administrator",
    "acdd72a7-3385-48ef-bd42-f606fba81ae7": "Reader",
    # Storage
    "17d1049b-9a84-46fb-8f53-869881c3d3ab": "Storage Account Contributor",
    "ba92f5b4-2d11-453d-a403-e96b0029c9fe": "Storage Blob Data Contributor",
    "b7e6dc6d-f1e8-4753-8033-0f276bb0955b": "Storage Blob Data Owner",
    "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1": "Storage Blob Data Reader",
    "db58b8e5-c6ad-4a2a-8342-4190687cbf4a": "Storage Blob Delegator",
    "69566ab7-960f-475b-8e7c-b3118f30c6bd": "Storage File Data Privileged Contributor",
    "0c867c2a-1d8c-454a-a3db-ab2ea1bdc8bb": "Storage File Data SMB Share Contributor",
    "974c5e8b-45b9-4653-ba55-5f855dd0fb88": "Storage Queue Data Contributor",
    "8a0f0c08-91a1-4084-bc3d-661d67233fed": "Storage Queue Data Message Processor",
    "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a": "Storage Queue Data Message Sender",
    "19e7f393-937e-4f77-808e-94535e297925": "Storage Queue Data Reader",
    "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3": "Storage Table Data Contributor",
    "76199698-9eea-4c19-bc75-cec21354c6b6": "Storage Table Data Reader",
    # Web and Mobile
    # (Web PubSub Service Owner: the id as the built-in roles list gives it, checked on
    # 2026-11-29 against two published copies of that list.)
    "12cf5a90-567b-43ae-8102-96cf46c7d9b4": "Web PubSub Service Owner",
    "2cc479cb-7b4d-49a8-b449-8c00fd0f0a4b": "Web Plan Contributor",
    "de139f84-1756-47ae-9be6-808fbbe84772": "Website Contributor",
    # Databases
    "fbdf93bf-df7d-467e-a4d2-9458aa1360c8": "Cosmos DB Account Reader Role",
    "230815da-be43-4aae-9cb4-875f7bd000aa": "Cosmos DB Operator",
    "db7b14f2-5adf-42da-9f96-f2ee17bab5cb": "CosmosBackupOperator",
    "5432c526-bc82-444a-b7ba-57c5b0b5b34f": "CosmosRestoreOperator",
    "5bd9cd88-fe45-4216-938b-f97437e15450": "DocumentDB Account Contributor",
    # Monitor
    "ae349356-3a1b-4a5e-921d-050484c6347e": "Application Insights Component Contributor",
    "92aaf0da-9dab-42b6-94a3-d43ce8d16293": "Log Analytics Contributor",
    "73c42c96-874c-492b-b04d-ab87d138a893": "Log Analytics Reader",
    "749f88d5-cbae-40b8-bcfc-e573ddc772fa": "Monitoring Contributor",
    "3913510d-42f4-4e42-8a64-420c390055eb": "Monitoring Metrics Publisher",
    "43d0d8ad-25c7-4714-9337-8ba259a9fe05": "Monitoring Reader",
    "e8ddcd69-c73f-4f9f-9844-4100522f16ad": "Workbook Contributor",
    "b279062a-9be3-42a0-92ae-8b3cf002ec4d": "Workbook Reader",
}

# Azure Cosmos DB for NoSQL built-in data-plane roles (sqlRoleDefinitions), id -> name.
# Source: "Use data plane role-based access control with Azure Cosmos DB for NoSQL",
# learn.microsoft.com/azure/cosmos-db/nosql/security/reference-data-plane-roles.
COSMOS_DATA_PLANE_ROLES: dict[str, str] = {
    "00000000-0000-0000-0000-000000000001": "Cosmos DB Built-in Data Reader",
    "00000000-0000-0000-0000-000000000002": "Cosmos DB Built-in Data Contributor",
}

# Services a subnet may be delegated to, for the hosting these templates deploy.
# Source: "Azure Functions Flex Consumption plan hosting", learn.microsoft.com/azure/azure-functions/
# flex-consumption-plan#virtual-network-integration: the subnet a Flex Consumption app integrates
# into is delegated to Microsoft.App/environments (the Microsoft.App resource provider must be
# registered). Other plans delegate to Microsoft.Web/serverFarms, which a Flex Consumption app
# cannot use, so it is not listed while the templates deploy only Flex Consumption.
SUBNET_DELEGATIONS: dict[str, str] = {
    "Microsoft.App/environments": "Flex Consumption virtual network integration",
}

# Private-link sub-resources (groupIds) of the services a private endpoint here may target.
# Source: "What is a private endpoint?", learn.microsoft.com/azure/private-link/
# private-endpoint-overview#private-link-resource (Azure Cosmos DB; Azure Storage; App Service;
# Key Vault).
PRIVATE_LINK_GROUP_IDS: dict[str, str] = {
    "Sql": "Azure Cosmos DB for NoSQL",
    "MongoDB": "Azure Cosmos DB for MongoDB",
    "Cassandra": "Azure Cosmos DB for Apache Cassandra",
    "Gremlin": "Azure Cosmos DB for Apache Gremlin",
    "Table": "Azure Cosmos DB for Table",
    "Analytical": "Azure Cosmos DB analytical store",
    "blob": "Storage blob",
    "blob_secondary": "Storage blob (secondary)",
    "table": "Storage table",
    "table_secondary": "Storage table (secondary)",
    "queue": "Storage queue",
    "queue_secondary": "Storage queue (secondary)",
    "file": "Storage file",
    "file_secondary": "Storage file (secondary)",
    "web": "Storage static website",
    "web_secondary": "Storage static website (secondary)",
    "dfs": "Data Lake Storage",
    "dfs_secondary": "Data Lake Storage (secondary)",
    "sites": "App Service / Azure Functions",
    "vault": "Key Vault",
}

# Microsoft.Web/sites `kind`. Source: Azure/app-service-linux-docs,
# Things_You_Should_Know/kind_property.md ("App Service Resource Kind reference").
SITE_KINDS: dict[str, str] = {
    "app": "Windows Web app",
    "app,linux": "Linux Web app",
    "hyperV": "Windows Container Web App",
    "app,container,windows": "Windows Container Web App",
    "app,linux,kubernetes": "Linux Web App on ARC",
    "functionapp": "Function Code App",
    "functionapp,linux": "Linux Consumption Function app",
    "functionapp,linux,container,kubernetes": "Function Container App on ARC",
    "functionapp,linux,kubernetes": "Function Code App on ARC",
}

# Microsoft.Web/serverfarms sku.name -> sku.tier. Sources: "Azure Functions hosting options"
# (learn.microsoft.com/azure/azure-functions/functions-scale: Y1 Dynamic, EP1-3 ElasticPremium,
# FC1 FlexConsumption) and "App Service pricing tiers" (F1 Free, D1 Shared, B Basic, S Standard,
# P*v2 PremiumV2, P*v3 PremiumV3).
PLAN_SKUS: dict[str, str] = {
    "FC1": "FlexConsumption",
    "Y1": "Dynamic",
    "EP1": "ElasticPremium",
    "EP2": "ElasticPremium",
    "EP3": "ElasticPremium",
    "F1": "Free",
    "D1": "Shared",
    "B1": "Basic",
    "B2": "Basic",
    "B3": "Basic",
    "S1": "Standard",
    "S2": "Standard",
    "S3": "Standard",
    "P1v2": "PremiumV2",
    "P2v2": "PremiumV2",
    "P3v2": "PremiumV2",
    "P0v3": "PremiumV3",
    "P1v3": "PremiumV3",
    "P2v3": "PremiumV3",
    "P3v3": "PremiumV3",
}

# Platform metrics by namespace (names as the REST API spells them). Sources: "Supported metrics
# for Microsoft.DocumentDB/DatabaseAccounts", learn.microsoft.com/azure/azure-monitor/reference/
# supported-metrics/microsoft-documentdb-databaseaccounts-metrics, and the Azure Monitor Baseline
# Alerts list for databaseAccounts (azure.github.io/azure-monitor-baseline-alerts).
METRICS: dict[str, set[str]] = {
    "microsoft.documentdb/databaseaccounts": {
        "AddRegion",
        "AutoscaledRU",
        "DataUsage",
        "DocumentCount",
        "IndexUsage",
        "MetadataRequests",
        "MongoRequests",
        "NormalizedRUConsumption",
        "OfflineRegion",
        "ProvisionedThroughput",
        "RegionFailover",
        "RemoveRegion",
        "ReplicationLatency",
        "ServerSideLatency",
        "ServiceAvailability",
        "SqlContainerDelete",
        "SqlDatabaseDelete",
        "TotalRequests",
        "TotalRequestUnits",
    },
}

# Regions that offer Flex Consumption. Source: the official Flex Consumption azd template,
# Azure-Samples/functions-quickstart-dotnet-azd infra/main.bicep at fe74255 (February 2026), its
# `location` @allowed list without the canary region eastus2euap. `az functionapp
# list-flexconsumption-locations` gives the current list.
FLEX_CONSUMPTION_REGIONS: set[str] = {
    "australiaeast", "australiasoutheast", "brazilsouth", "canadacentral", "centralindia",
    "centralus", "eastasia", "eastus", "eastus2", "francecentral", "germanywestcentral",
    "italynorth", "japaneast", "koreacentral", "northcentralus", "northeurope", "norwayeast",
    "southafricanorth", "southcentralus", "southeastasia", "southindia", "spaincentral",
    "swedencentral", "uaenorth", "uksouth", "ukwest", "westcentralus", "westeurope", "westus",
    "westus2", "westus3",
}

# Azure regions without a paired region: no geo-redundant storage, so a Cosmos DB account there
# takes only Local or Zone periodic backup storage redundancy.
# Source: "Azure region pairs and nonpaired regions", learn.microsoft.com/azure/reliability/
# regions-paired (nonpaired regions list), and "Periodic backup storage redundancy in Azure
# Cosmos DB" ("if you use a non-paired region, you need to explicitly choose the backup storage
# redundancy").
NONPAIRED_REGIONS: set[str] = {
    "austriaeast", "belgiumcentral", "chilecentral", "indonesiacentral", "israelcentral",
    "italynorth", "malaysiawest", "mexicocentral", "newzealandnorth", "polandcentral",
    "qatarcentral", "spaincentral",
}
