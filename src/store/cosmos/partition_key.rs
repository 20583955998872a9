//! A partition key as the SDK takes it.

use azure_data_cosmos::models::PartitionKey;

/// Partition keys are passed as owned strings: the SDK's `&'static str` conversion would not
/// accept a borrowed key.
pub(super) fn pk(key: &str) -> PartitionKey {
    PartitionKey::from(key.to_string())
}
