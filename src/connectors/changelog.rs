//! A table's changelog as a [`Source`]: every acknowledged write is an entry stamped with the
//! epoch it was acknowledged in, so a job's offset in a table is an epoch: after epoch `e`
//! it has seen every write of epochs up to `e`.

use crate::common::{ChangeBatch, Epoch, RelationId};
use crate::error::Result;
use crate::state::Store;

use super::{Offset, Source};

/// A position in a table's changelog: the last epoch read (entries of later epochs follow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChangelogOffset(pub Epoch);

impl Offset for ChangelogOffset {
    const START: Self = ChangelogOffset(Epoch(0));

    fn to_stored(self) -> u64 {
        self.0.0
    }

    fn from_stored(stored: u64) -> Self {
        ChangelogOffset(Epoch(stored))
    }
}

/// One table's changelog in the store, read by epoch range. Entries of the epochs being read
/// must not be truncated (the engine keeps the changelog after the oldest retained checkpoint
/// of every view that reads the table).
pub struct ChangelogSource<'a> {
    store: &'a Store,
    table: RelationId,
}

impl<'a> ChangelogSource<'a> {
    /// The changelog of table `table` in `store`.
    pub fn new(store: &'a Store, table: RelationId) -> Self {
        ChangelogSource { store, table }
    }
}

impl Source for ChangelogSource<'_> {
    type Offset = ChangelogOffset;

    fn relation(&self) -> RelationId {
        self.table
    }

    fn read(
        &self,
        after: ChangelogOffset,
        upto: ChangelogOffset,
        f: &mut dyn FnMut(ChangelogOffset, ChangeBatch) -> Result<()>,
    ) -> Result<()> {
        for entry in self
            .store
            .read_changelog_range(self.table, after.0, upto.0)?
        {
            f(ChangelogOffset(entry.epoch), entry.change)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn batch(values: &[i64]) -> ChangeBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
        let column = Arc::new(Int64Array::from(values.to_vec()));
        ChangeBatch::inserts(RecordBatch::try_new(schema, vec![column]).unwrap())
    }

    fn values(changes: &[ChangeBatch]) -> Vec<i64> {
        changes
            .iter()
            .flat_map(|c| {
                let col = c.batch.column(0).as_any().downcast_ref::<Int64Array>();
                col.unwrap().values().to_vec()
            })
            .collect()
    }

    #[test]
    fn reads_the_epochs_of_a_range_in_order_and_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // Table 7: epoch 1 holds 1 and 2, epoch 3 holds 3, epoch 4 holds 4. Table 8 holds 100.
        let (a, b, c, d) = (batch(&[1, 2]), batch(&[3]), batch(&[4]), batch(&[100]));
        store
            .append_changelog(
                7,
                &[(1, Epoch(1), &a), (2, Epoch(3), &b), (3, Epoch(4), &c)],
            )
            .unwrap();
        store.append_changelog(8, &[(1, Epoch(2), &d)]).unwrap();
        let source = ChangelogSource::new(&store, 7);
        assert_eq!(source.relation(), 7);
        let start = ChangelogOffset::START;
        let all = source
            .read_all(start, ChangelogOffset(Epoch(u64::MAX)))
            .unwrap();
        assert_eq!(values(&all), vec![1, 2, 3, 4]);
        // (1, 3]: only epoch 3; reading it again gives the same.
        let (after, upto) = (ChangelogOffset(Epoch(1)), ChangelogOffset(Epoch(3)));
        assert_eq!(values(&source.read_all(after, upto).unwrap()), vec![3]);
        assert_eq!(values(&source.read_all(after, upto).unwrap()), vec![3]);
        let mut offsets = Vec::new();
        source
            .read(start, ChangelogOffset(Epoch(4)), &mut |o, _| {
                offsets.push(o);
                Ok(())
            })
            .unwrap();
        assert_eq!(offsets, [1, 3, 4].map(|e| ChangelogOffset(Epoch(e))));
        assert_eq!(
            ChangelogOffset::from_stored(ChangelogOffset(Epoch(9)).to_stored()).0,
            Epoch(9)
        );
    }
}
