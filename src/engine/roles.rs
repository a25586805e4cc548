//! Role statements (`CREATE / ALTER / DROP ROLE`) and the lookups authentication makes.

use tracing::info;

use crate::catalog::roles::{Role, RoleChanges, Roles, no_such_role};
use crate::error::Result;

use super::{Engine, lock};

impl Engine {
    fn persist_roles(&self, roles: &Roles) -> Result<()> {
        self.store.put_meta("roles", &roles.to_json()?)
    }

    /// Applies `change` to a copy of the roles, persists it, then publishes it.
    fn change_roles(&self, change: impl FnOnce(&mut Roles) -> Result<()>) -> Result<()> {
        let mut roles = lock(&self.roles);
        let mut next = roles.clone();
        change(&mut next)?;
        self.persist_roles(&next)?;
        *roles = next;
        Ok(())
    }

    /// The role named `name` (a copy), if any.
    pub fn role(&self, name: &str) -> Option<Role> {
        lock(&self.roles).get(name).cloned()
    }

    /// Every role (a copy), by name.
    pub fn roles(&self) -> Vec<Role> {
        lock(&self.roles).iter().cloned().collect()
    }

    /// Creates a role; `Ok(false)` when it exists and `if_not_exists` says to skip.
    ///
    /// # Errors
    /// `42710` when the name is taken; store errors.
    pub fn create_role(&self, role: Role, if_not_exists: bool) -> Result<bool> {
        let name = role.name.clone();
        let mut created = true;
        self.change_roles(|roles| {
            if if_not_exists && roles.get(&role.name).is_some() {
                created = false;
                return Ok(());
            }
            roles.create(role)
        })?;
        if created {
            info!(role = name, "role created");
        }
        Ok(created)
    }

    /// Changes a role's attributes (`ALTER ROLE name WITH ...`).
    ///
    /// # Errors
    /// `42704` when there is no such role; store errors.
    pub fn alter_role(&self, name: &str, changes: RoleChanges) -> Result<()> {
        self.change_roles(|roles| roles.alter(name, changes))
    }

    /// Renames a role (`ALTER ROLE from RENAME TO to`).
    ///
    /// # Errors
    /// `42704` when there is no role `from`; `42710` when `to` is taken; store errors.
    pub fn rename_role(&self, from: &str, to: &str) -> Result<()> {
        self.change_roles(|roles| roles.rename(from, to))
    }

    /// Drops a role; `Ok(false)` when there is none and `if_exists` says to skip.
    ///
    /// # Errors
    /// `42704` when there is no such role (without `if_exists`); store errors.
    pub fn drop_role(&self, name: &str, if_exists: bool) -> Result<bool> {
        let mut dropped = false;
        self.change_roles(|roles| {
            dropped = roles.remove(name);
            if dropped || if_exists {
                Ok(())
            } else {
                Err(no_such_role(name))
            }
        })?;
        if dropped {
            info!(role = name, "role dropped");
        }
        Ok(dropped)
    }

    /// Makes `name` a superuser that may log in with `password`, creating the role if needed
    /// (the server's `--superuser` flag: the first user of a server that asks for passwords).
    ///
    /// # Errors
    /// As [`crate::catalog::roles::PasswordVerifier::new`]; store errors.
    pub fn ensure_superuser(&self, name: &str, password: &str) -> Result<()> {
        let verifier = crate::catalog::roles::PasswordVerifier::new(password)?;
        self.change_roles(|roles| {
            let changes = RoleChanges {
                superuser: Some(true),
                login: Some(true),
                password: Some(Some(verifier)),
            };
            if roles.get(name).is_some() {
                roles.alter(name, changes)
            } else {
                let mut role = Role {
                    name: name.to_string(),
                    superuser: true,
                    login: true,
                    password: None,
                };
                changes.apply(&mut role);
                roles.create(role)
            }
        })?;
        info!(role = name, "superuser set from the server's flags");
        Ok(())
    }
}
