//! A list shared between analyses in chunks: cloning it copies one pointer per chunk, not one
//! per element, and changing one element copies that element's chunk at most (the
//! source map and the apps of an analysis that changed one app among 10,000 are the previous
//! ones but for that app, and must not cost 10,000 pointer copies to hand over).

use std::sync::Arc;

/// Elements per chunk: a clone of 10,000 elements copies 79 pointers, a change copies at most
/// 128.
const CHUNK: usize = 128;

/// A persistent list: every chunk but the last is full.
#[derive(Debug)]
pub struct Chunked<T> {
    chunks: Vec<Arc<Vec<T>>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Chunked<T> {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

// Not derived: a derive would ask `T: Clone`, which sharing the chunks does not need.
impl<T> Clone for Chunked<T> {
    fn clone(&self) -> Chunked<T> {
        Chunked {
            chunks: self.chunks.clone(),
            len: self.len,
        }
    }
}

impl<T> Chunked<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there is no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element at `index`.
    pub fn get(&self, index: usize) -> Option<&T> {
        self.chunks.get(index / CHUNK)?.get(index % CHUNK)
    }

    /// Every element in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + Clone {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// Like [`slice::binary_search_by`] over the elements in order.
    pub fn binary_search_by(
        &self,
        mut compare: impl FnMut(&T) -> std::cmp::Ordering,
    ) -> Result<usize, usize> {
        let (mut low, mut high) = (0, self.len);
        while low < high {
            let middle = low + (high - low) / 2;
            let Some(element) = self.get(middle) else {
                return Err(low);
            };
            match compare(element) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Ok(middle),
            }
        }
        Err(low)
    }

    /// True when chunk `chunk` of both lists is the same allocation: its elements are the same
    /// (compared by pointer, O(1)). For walks that skip what two lists share.
    pub fn same_chunk(&self, other: &Chunked<T>, chunk: usize) -> bool {
        match (self.chunks.get(chunk), other.chunks.get(chunk)) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Elements per chunk (for walks with [`Chunked::same_chunk`]).
    pub const CHUNK: usize = CHUNK;
}

impl<T: Clone> Chunked<T> {
    /// Appends an element (copies the last chunk when it is shared).
    pub fn push(&mut self, element: T) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => Arc::make_mut(last).push(element),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(element);
                self.chunks.push(Arc::new(chunk));
            }
        }
        self.len += 1;
    }

    /// Replaces the element at `index` (copies its chunk when it is shared); false, and no
    /// change, when there is none.
    pub fn set(&mut self, index: usize, element: T) -> bool {
        match self.get_mut(index) {
            Some(slot) => {
                *slot = element;
                true
            }
            None => false,
        }
    }

    /// The element at `index`, mutable (copies its chunk when it is shared).
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        if index >= self.len {
            return None;
        }
        let chunk = self.chunks.get_mut(index / CHUNK)?;
        Arc::make_mut(chunk).get_mut(index % CHUNK)
    }

    /// The elements as a vector (a copy of each).
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<T> {
        self.iter().cloned().collect()
    }

    /// The elements as a vector: moved out of the chunks held by this list alone, copied from
    /// the shared ones.
    pub fn into_vec(self) -> Vec<T> {
        let mut elements = Vec::with_capacity(self.len);
        for chunk in self.chunks {
            elements.extend(Arc::unwrap_or_clone(chunk));
        }
        elements
    }
}

impl<T: Clone> FromIterator<T> for Chunked<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Chunked<T> {
        let mut list = Chunked::default();
        for element in iter {
            list.push(element);
        }
        list
    }
}

impl<T: Clone> From<Vec<T>> for Chunked<T> {
    fn from(elements: Vec<T>) -> Chunked<T> {
        elements.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_leaves_the_clone_and_the_other_chunks_alone() {
        let original: Chunked<usize> = (0..300).collect();
        assert_eq!(original.len(), 300);
        let mut changed = original.clone();
        assert!(changed.set(200, 7));
        assert!(!changed.set(300, 7));
        assert_eq!(original.get(200), Some(&200));
        assert_eq!(changed.get(200), Some(&7));
        assert_eq!(changed.get(300), None);
        // 200 is in chunk 1: chunks 0 and 2 are still shared, chunk 1 is not.
        assert!(changed.same_chunk(&original, 0));
        assert!(!changed.same_chunk(&original, 1));
        assert!(changed.same_chunk(&original, 2));
        let expected: Vec<usize> = (0..300).map(|i| if i == 200 { 7 } else { i }).collect();
        assert_eq!(changed.to_vec(), expected);
        assert_eq!(changed.iter().next_back(), Some(&299));
    }

    #[test]
    fn binary_search_finds_each_element_and_each_gap() {
        let list: Chunked<usize> = (0..300).map(|i| i * 2).collect();
        for i in 0..300 {
            assert_eq!(list.binary_search_by(|x| x.cmp(&(i * 2))), Ok(i));
            assert_eq!(list.binary_search_by(|x| x.cmp(&(i * 2 + 1))), Err(i + 1));
        }
        let empty: Chunked<usize> = Chunked::default();
        assert_eq!(empty.binary_search_by(|x| x.cmp(&1)), Err(0));
    }
}
