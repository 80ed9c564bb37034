//go:build !lockd_broken_dirviewread

package lockd

const brokenDirViewRead = false
