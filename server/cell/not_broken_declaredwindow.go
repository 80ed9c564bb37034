//go:build !lockd_broken_declaredwindow

package cell

const brokenDeclaredWindow = false
